"""Writes the .npy fixtures of worker/src/pipeline/decode/npy.rs's tests.

Run from this directory: /work/main/.venv/bin/python make.py (numpy 2.3).
"""
import numpy as np

np.save("f32_2x3.npy", np.arange(6, dtype=np.float32).reshape(2, 3) * 1.5)
np.save("i64_scalar.npy", np.array(-7, dtype=np.int64))
np.save("u8_5.npy", np.array([0, 1, 2, 254, 255], dtype=np.uint8))
np.save("bool_2x2.npy", np.array([[True, False], [False, True]]))
np.save("f16_3.npy", np.array([1.0, -2.5, 65504.0], dtype=np.float16))
np.save("empty_0x3.npy", np.zeros((0, 3), dtype=np.int16))
with open("v2_i32_2x2.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([[1, -2], [3, -4]], dtype=np.int32), version=(2, 0))
with open("v3_u16_3.npy", "wb") as f:
    np.lib.format.write_array(f, np.array([1, 2, 65535], dtype=np.uint16), version=(3, 0))
# Rejected ones.
np.save("fortran_2x3.npy", np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)))
np.save("big_endian_f4.npy", np.arange(3, dtype=">f4"))
np.save("object.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
np.save("unicode.npy", np.array(["ab", "c"]))
np.save("structured.npy", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]))
np.save("complex.npy", np.zeros(2, dtype=np.complex64))
