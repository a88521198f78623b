//! Tests of the synthetic image generator.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn render_is_deterministic_across_threads_and_reused_buffers() {
    let first = render(7, 3, 10).expect("renders");
    render(7, 4, 10).expect("renders"); // Leaves other data in this thread's canvas.
    assert_eq!(render(7, 3, 10).expect("renders").bytes, first.bytes);
    let elsewhere = std::thread::spawn(|| render(7, 3, 10).expect("renders"));
    assert_eq!(elsewhere.join().expect("thread").bytes, first.bytes);
    assert_ne!(render(8, 3, 10).expect("renders").bytes, first.bytes);
}

#[test]
fn images_decode_with_imagenet_like_sizes() {
    for index in 0..6 {
        let image = render(1, index, 4).expect("renders");
        let (w, h) = (image.width, image.height);
        assert!((300..=400).contains(&w.min(h)), "{w}x{h}");
        assert!(w.max(h) <= 500, "{w}x{h}");
        assert_eq!(image.class, index % 4);
        assert!(image.file_name.starts_with(&format!("{index:06}.")));
        let decoded = image::load_from_memory(&image.bytes).expect("decodes");
        assert_eq!((decoded.width(), decoded.height()), (w, h));
    }
}

#[test]
fn about_one_image_in_fifty_is_a_png() {
    // Whether image `i` is a PNG is the first draw of its stream.
    let is_png = |i: u64| seed::below(&mut seed::rng(Domain::Synth, &[5, i]), 50) == 0;
    let pngs: Vec<u64> = (0..5000).filter(|&i| is_png(i)).collect();
    assert!((60..140).contains(&pngs.len()), "{} pngs", pngs.len());
    let image = render(5, pngs[0] as usize, 2).expect("renders");
    assert!(image.file_name.ends_with(".png") && image.bytes.starts_with(b"\x89PNG"));
    image::load_from_memory(&image.bytes).expect("decodes");
}

#[test]
fn class_dirs_are_zero_padded() {
    assert_eq!(class_dir_name(0, 1), "class_000");
    assert_eq!(class_dir_name(999, 1000), "class_999");
    assert_eq!(class_dir_name(42, 1001), "class_0042");
}

fn options(images: usize, classes: usize) -> SynthOptions {
    let seed = 9;
    SynthOptions {
        images,
        classes,
        seed,
    }
}

#[test]
fn writes_an_image_folder_tree() {
    let dir = std::env::temp_dir().join(format!("tributary-synth-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let calls = AtomicUsize::new(0);
    let count = |_: u64| {
        calls.fetch_add(1, Ordering::Relaxed);
    };
    let summary = write_image_folder(&dir, &options(7, 3), &count).expect("writes");
    assert_eq!((summary.images, calls.into_inner()), (7, 7));
    assert_eq!(std::fs::read_dir(&dir).expect("dir").count(), 3);
    let mut on_disk = 0;
    for index in 0..7 {
        let stem = dir
            .join(class_dir_name(index % 3, 3))
            .join(format!("{index:06}"));
        let file = ["jpg", "png"]
            .map(|e| stem.with_extension(e))
            .into_iter()
            .find(|p| p.exists());
        on_disk += std::fs::metadata(file.expect("written"))
            .expect("metadata")
            .len();
    }
    assert_eq!(on_disk, summary.bytes);
    assert!((300.0..=500.0).contains(&summary.mean_width));
    std::fs::remove_dir_all(&dir).expect("cleans up");
}

#[test]
fn rejects_invalid_options() {
    let dir = std::env::temp_dir().join("tributary-synth-never-created");
    for (images, classes) in [(0, 1), (5, 0), (3, 4)] {
        let err = write_image_folder(&dir, &options(images, classes), &|_| {});
        assert!(matches!(err, Err(SynthError::InvalidOptions(_))));
    }
    assert!(!dir.exists());
    assert!(matches!(
        render(0, 0, 0),
        Err(SynthError::InvalidOptions(_))
    ));
}
