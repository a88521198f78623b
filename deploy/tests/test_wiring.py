"""Offline checks of deploy/k8s and deploy/examples, part 2 (part 1,
rendering and schemas, is test_manifests.py):

3. every flag and variable the manifests hand to `tributary`, torchrun,
   examples/train_resnet.py and etcd is one they accept;
4. the pieces agree with each other (ports, names, selectors, TLS paths).

Run from the repository root:  .venv/bin/python -m pytest -q deploy/tests
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import os
import re
import subprocess
import types
from functools import lru_cache
from pathlib import Path

import pytest

from deploylib import (
    DOCKERFILE,
    K8S,
    REPO,
    all_runs,
    containers,
    describe,
    etcd_argv,
    get_source,
    kustomization_dirs,
    pod_templates,
    references,
    rel,
    source_ids,
    torchrun_argv,
    tributary_argv,
    tributary_bin,
)

SOURCES = source_ids()
OVERLAY_AND_EXAMPLE_SOURCES = source_ids(include_bases=False)
EXAMPLE_SOURCES = [s for s in SOURCES if s.startswith("examples/")]


# =============================================================== tributary flags


@lru_cache(maxsize=None)
def tributary_help(binary: Path, subcommand: str) -> str:
    proc = subprocess.run([str(binary), subcommand, "--help"], capture_output=True, text=True,
                          timeout=30, env={"PATH": os.environ.get("PATH", "")})
    assert proc.returncode == 0, f"tributary {subcommand} --help failed: {proc.stderr}"
    return proc.stdout


def help_flags(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--([a-z0-9][a-z0-9-]*)", text))


def help_env(text: str) -> tuple[set[str], set[str]]:
    """Variable names and prefixes (`AWS_*`) the help names: clap's
    `[env: NAME=]` per flag, and the `Environment:` paragraph."""
    names = set(re.findall(r"\[env: ([A-Za-z_][A-Za-z0-9_]*)=", text))
    prefixes = set()
    m = re.search(r"^Environment:\s*$(.*?)(?:^\S|\Z)", text, re.M | re.S)
    if m:
        for line in m.group(1).splitlines():
            first = re.match(r"^\s+([A-Z][A-Z0-9_]*\*?)(?:\s{2,}|$)", line)
            tokens = ([first.group(1)] if first else []) + re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*\*?", line)
            for token in tokens:
                (prefixes.add(token[:-1]) if token.endswith("*") else names.add(token))
    return names, prefixes


def known_env(binary: Path, subcommand: str) -> tuple[set[str], set[str]]:
    names, prefixes = help_env(tributary_help(binary, subcommand))
    if subcommand != "coordinator":
        # The storage variables (AWS_*, ...) are read by every command that
        # opens a URL; the coordinator's help lists them.
        more_names, more_prefixes = help_env(tributary_help(binary, "coordinator"))
        names |= more_names
        prefixes |= more_prefixes
    return names, prefixes


def tributary_runs_in(source):
    """The tributary containers of `source`; skips the test when it has none."""
    runs = [(run, argv) for run, argv in tributary_runs() if run.source.name == source]
    if not runs:
        pytest.skip(f"{source} runs no tributary container")
    return runs


def tributary_runs(include_bases=True):
    return [(run, argv) for run in all_runs(include_bases)
            if (argv := tributary_argv(run.container, run.env.values)) is not None]


def test_coordinator_help_names_its_environment():
    tributary = tributary_bin()
    names, prefixes = help_env(tributary_help(tributary, "coordinator"))
    missing = {"TRIBUTARY_LISTEN", "TRIBUTARY_ADVERTISE", "TRIBUTARY_ETCD", "TRIBUTARY_LEADER_TTL_S",
               "TRIBUTARY_FLUSH_MS", "TRIBUTARY_HEALTH_LISTEN", "TRIBUTARY_TLS_CERT",
               "TRIBUTARY_TLS_KEY", "RUST_LOG"} - names
    assert not missing, f"`tributary coordinator --help` does not name {sorted(missing)}"
    assert {"AWS_", "GOOGLE_", "AZURE_"} <= prefixes, (
        f"`tributary coordinator --help` has no Environment paragraph naming AWS_*, GOOGLE_*, "
        f"AZURE_* (found prefixes {sorted(prefixes)})")


@pytest.mark.parametrize("source", SOURCES)
def test_tributary_env_vars_are_ones_the_binary_reads(source):
    tributary, errors = tributary_bin(), []
    runs = tributary_runs_in(source)
    for run, argv in runs:
        assert argv, f"{run.label}: no subcommand in args"
        names, prefixes = known_env(tributary, argv[0])
        referenced = set()
        for text in run.container.get("command", []) + run.container.get("args", []):
            referenced |= references(str(text))
        for name in run.env.values:
            if name in names or name in referenced or any(name.startswith(p) for p in prefixes):
                continue
            errors.append(f"{run.label}: {name} ({run.env.origin[name]}) is neither read by "
                          f"`tributary {argv[0]}` (see its --help) nor used as $({name}) in its args")
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("source", SOURCES)
def test_tributary_args_and_env_pass_its_own_check(source):
    """`tributary coordinator ... --check` with exactly the container's
    environment; other subcommands (no --check) get their flags checked
    against their --help."""
    tributary, errors = tributary_bin(), []
    runs = tributary_runs_in(source)
    for run, argv in runs:
        subcommand = argv[0]
        help_text = tributary_help(tributary, subcommand)
        flags = help_flags(help_text)
        if "check" not in flags:
            if subcommand == "coordinator":
                errors.append(f"{run.label}: `tributary coordinator` has no --check flag yet")
                continue
            for arg in argv[1:]:
                if arg == "--":
                    break
                if arg.startswith("--") and arg[2:].split("=")[0] not in flags:
                    errors.append(f"{run.label}: `tributary {subcommand}` has no flag {arg.split('=')[0]}")
            continue
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")} | run.env.values
        proc = subprocess.run([str(tributary), *argv, "--check"], capture_output=True, text=True,
                              timeout=30, env=env, cwd=REPO)
        if proc.returncode != 0:
            shown = " ".join(argv)
            errors.append(f"{run.label}: `tributary {shown} --check` exited {proc.returncode} with "
                          f"env {sorted(run.env.values)}:\n{proc.stderr.strip()}")
        unexpanded = [a for a in argv if "$(" in a]
        if unexpanded:
            errors.append(f"{run.label}: args keep unexpanded references {unexpanded}: "
                          "define the variable in env before using it")
    assert not errors, "\n".join(errors)


def test_every_tributary_subcommand_in_the_manifests_exists():
    tributary = tributary_bin()
    used = {argv[0] for _, argv in tributary_runs() if argv}
    assert "coordinator" in used, "no manifest runs `tributary coordinator`"
    top = subprocess.run([str(tributary), "--help"], capture_output=True, text=True, timeout=30).stdout
    for sub in used:
        assert re.search(rf"^\s+{re.escape(sub)}\s", top, re.M), f"`tributary --help` lists no {sub!r}"


# =============================================================== trainers


@lru_cache(maxsize=None)
def torchrun_parser() -> argparse.ArgumentParser:
    # The parser reads PET_* variables as defaults: build it without any.
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("PET_")}
    try:
        from torch.distributed.run import get_args_parser
        return get_args_parser()
    finally:
        os.environ.update(saved)


def parse_or_error(parser_call, argv: list[str]) -> tuple[object, str | None]:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            return parser_call(argv), None
        except SystemExit as e:
            lines = stderr.getvalue().strip().splitlines()
            return None, f"exit {e.code}: " + " ".join(l for l in lines if "error:" in l or not lines)


def examples_dir_in_trainer_image() -> str:
    """Where the trainer image keeps examples/ (deploy/docker/Dockerfile)."""
    m = re.search(r"^COPY\s+examples/?\s+(\S+?)/?\s*$", DOCKERFILE.read_text(), re.M)
    assert m, f"{rel(DOCKERFILE)}: no `COPY examples/ DEST` in the trainer stage"
    return m.group(1).rstrip("/")


def script_parse_args(script: Path, env: dict[str, str]):
    """The script's own parse_args(), lifted out of the file so that its
    imports (torch, tributary) do not run, with the container's environment
    as os.environ."""
    tree = ast.parse(script.read_text())
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "parse_args"), None)
    assert fn is not None, f"{rel(script)} has no top-level parse_args()"
    namespace = {"argparse": argparse, "os": types.SimpleNamespace(environ=env),
                 "__doc__": ast.get_docstring(tree) or ""}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(script), "exec"), namespace)
    parse_args = namespace["parse_args"]

    def call(argv):
        import sys
        saved = sys.argv
        sys.argv = [str(script), *argv]
        try:
            return parse_args()
        finally:
            sys.argv = saved

    return call


def trainer_runs():
    return [(run, argv) for run in all_runs(include_bases=False)
            if (argv := torchrun_argv(run.container, run.env.values)) is not None]


def test_there_are_trainer_examples():
    sources = {run.source.name for run, _ in trainer_runs()}
    assert "examples/pytorchjob-elastic.yaml" in sources and "examples/statefulset-torchrun.yaml" in sources, sources


@pytest.mark.parametrize("source", EXAMPLE_SOURCES)
def test_trainer_args_are_accepted_by_torchrun_and_the_script(source):
    errors = []
    runs = [(run, argv) for run, argv in trainer_runs() if run.source.name == source]
    if not runs:
        pytest.skip(f"{source} runs no torchrun container")
    for run, argv in runs:
        parsed, error = parse_or_error(torchrun_parser().parse_args, argv)
        if error:
            errors.append(f"{run.label}: torchrun rejects {argv}: {error}")
            continue
        image_dir = examples_dir_in_trainer_image()
        script = parsed.training_script
        if not script.startswith(image_dir + "/"):
            errors.append(f"{run.label}: the script {script} is not under {image_dir}, where the "
                          "trainer image has examples/")
            continue
        local = REPO / "examples" / script[len(image_dir) + 1:]
        if not local.exists():
            errors.append(f"{run.label}: {script} is {rel(local)}, which does not exist")
            continue
        args, error = parse_or_error(script_parse_args(local, run.env.values), parsed.training_script_args)
        if error:
            errors.append(f"{run.label}: {rel(local)} rejects {parsed.training_script_args}: {error}")
            continue
        if not getattr(args, "coordinator", None):
            errors.append(f"{run.label}: no coordinator address (--coordinator or TRIBUTARY_COORDINATOR): "
                          "every rank would run its own in-process coordinator")
        checkpoint = getattr(args, "checkpoint", None)
        if checkpoint:
            errors += checkpoint_on_shared_volume(run, checkpoint)
    assert not errors, "\n".join(errors)


def checkpoint_on_shared_volume(run, checkpoint: str) -> list[str]:
    """Rank 0 writes the checkpoint and restarted pods read it: it must be on
    a PersistentVolumeClaim, not the container's filesystem."""
    volumes = {v["name"]: v for v in run.pod.template["spec"].get("volumes", [])}
    for mount in run.container.get("volumeMounts", []):
        if checkpoint.startswith(mount["mountPath"].rstrip("/") + "/"):
            if "persistentVolumeClaim" in volumes.get(mount["name"], {}):
                return []
            return [f"{run.label}: --checkpoint {checkpoint} is on volume {mount['name']}, not a "
                    "PersistentVolumeClaim: restarted pods would not find it"]
    return [f"{run.label}: --checkpoint {checkpoint} is on no mounted volume"]


@lru_cache(maxsize=None)
def variables_the_trainer_reads() -> frozenset[str]:
    """TRIBUTARY_* names the trainer side reads: the example scripts, the
    Python package and the Rust loader it wraps."""
    names = set()
    files = (list((REPO / "examples").glob("*.py")) + list((REPO / "python" / "tributary").rglob("*.py"))
             + list((REPO / "python" / "src").rglob("*.rs")) + list((REPO / "worker" / "src").rglob("*.rs")))
    for path in files:
        names |= set(re.findall(r"[\"'](TRIBUTARY_[A-Z0-9_]+)[\"']", path.read_text()))
    return frozenset(names)


@pytest.mark.parametrize("source", EXAMPLE_SOURCES)
def test_trainer_tributary_variables_are_ones_the_trainer_reads(source):
    errors = []
    runs = [run for run, _ in trainer_runs() if run.source.name == source]
    if not runs:
        pytest.skip(f"{source} runs no torchrun container")
    for run in runs:
        for name in run.env.values:
            if name.startswith("TRIBUTARY_") and name not in variables_the_trainer_reads():
                errors.append(f"{run.label}: {name} is read by neither examples/, python/ nor the "
                              f"loader (they read {sorted(variables_the_trainer_reads())})")
    assert not errors, "\n".join(errors)


def test_trainers_call_the_coordinator_service():
    production = get_source("overlays/production")
    services = {(o["metadata"]["name"], o["metadata"]["namespace"], p["port"])
                for o in production.objects if o["kind"] == "Service" for p in o["spec"]["ports"]}
    for run, _ in trainer_runs():
        address = run.env.values.get("TRIBUTARY_COORDINATOR", "")
        m = re.fullmatch(r"(?:https?://)?([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?:(\d+)", address)
        assert m, f"{run.label}: TRIBUTARY_COORDINATOR={address!r} is not SERVICE.NAMESPACE.svc:PORT"
        assert (m.group(1), m.group(2), int(m.group(3))) in services, (
            f"{run.label}: TRIBUTARY_COORDINATOR={address!r} names no Service port of "
            f"overlays/production ({sorted(services)})")


# =============================================================== etcd


# Flags the etcd image (3.5) has that Debian's etcd 3.4 (the one the tests
# run) does not list; each must be named here with why it is needed.
ETCD_35_ONLY_FLAGS: dict[str, str] = {}


@lru_cache(maxsize=None)
def etcd_help_flags() -> frozenset[str]:
    import shutil
    exe = shutil.which("etcd")
    if not exe:
        pytest.fail("etcd is not on PATH: scripts/setup.sh installs Debian's etcd-server")
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=30)
    return frozenset(re.findall(r"^\s+--([a-z0-9][a-z0-9-]*)", proc.stdout + proc.stderr, re.M))


def etcd_runs():
    return [(run, argv) for run in all_runs()
            if (argv := etcd_argv(run.container, run.env.values)) is not None]


def test_etcd_flags_exist():
    runs = etcd_runs()
    assert runs, "no etcd container in any render"
    errors = []
    for run, argv in runs:
        for arg in argv:
            if not arg.startswith("--"):
                errors.append(f"{run.label}: {arg!r} is not a --flag=value")
                continue
            flag = arg[2:].split("=")[0]
            if flag not in etcd_help_flags() and flag not in ETCD_35_ONLY_FLAGS:
                errors.append(f"{run.label}: etcd has no flag --{flag}")
            if "$(" in arg:
                errors.append(f"{run.label}: {arg} keeps an unexpanded reference")
    assert not errors, "\n".join(errors)


def flag_values(argv: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--") and "=" in a)


def test_etcd_members_find_each_other_and_the_coordinator_finds_them():
    production = get_source("overlays/production")
    sts = next(o for o in production.objects if o["kind"] == "StatefulSet"
               and o["metadata"]["name"] == "tributary-etcd")
    name, ns, replicas = sts["metadata"]["name"], sts["metadata"]["namespace"], sts["spec"]["replicas"]
    headless = next(o for o in production.objects if o["kind"] == "Service"
                    and o["metadata"]["name"] == sts["spec"]["serviceName"])
    assert headless["spec"].get("clusterIP") == "None", "the governing Service is not headless"
    assert headless["spec"].get("publishNotReadyAddresses") is True, (
        "members must resolve each other before they are ready")
    run, argv = next((r, a) for r, a in etcd_runs() if r.source.name == "overlays/production")
    flags = flag_values(argv)
    members = [f"{name}-{i}" for i in range(replicas)]
    expected = ",".join(f"{m}=http://{m}.{headless['metadata']['name']}.{ns}.svc:2380" for m in members)
    assert flags["initial-cluster"] == expected, (
        f"{run.label}: --initial-cluster={flags['initial-cluster']} does not list the "
        f"{replicas} members as {expected}")
    me = run.pod.pod_name
    assert flags["name"] == me
    assert f"{me}=" + flags["initial-advertise-peer-urls"] in flags["initial-cluster"].split(","), (
        f"{run.label}: --initial-advertise-peer-urls is not this member's --initial-cluster entry")
    coordinator_env = next(r for r in all_runs() if r.source.name == "overlays/production"
                           and r.container["name"] == "coordinator").env.values
    endpoints = coordinator_env["TRIBUTARY_ETCD"].split(",")
    assert endpoints == [f"http://{m}.{headless['metadata']['name']}:2379" for m in members], (
        f"overlays/production: TRIBUTARY_ETCD={coordinator_env['TRIBUTARY_ETCD']} is not the "
        f"{replicas} etcd members")


# =============================================================== consistency


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


@pytest.mark.parametrize("source", ["overlays/production", "overlays/production-tls",
                                    "overlays/external-etcd", "overlays/dev"])
def test_coordinator_ports_and_probes_agree(source):
    run = next(r for r in all_runs() if r.source.name == source and r.container["name"] == "coordinator")
    env, c = run.env.values, run.container
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    argv = tributary_argv(c, env)
    advertise = next(a.split("=", 1)[1] for a in argv if a.startswith("--advertise="))
    assert port_of(env["TRIBUTARY_LISTEN"]) == ports["grpc"] == port_of(advertise), (
        f"{run.label}: TRIBUTARY_LISTEN {env['TRIBUTARY_LISTEN']}, port grpc {ports['grpc']} and "
        f"--advertise {advertise} disagree")
    assert port_of(env["TRIBUTARY_HEALTH_LISTEN"]) == ports["health"], (
        f"{run.label}: TRIBUTARY_HEALTH_LISTEN {env['TRIBUTARY_HEALTH_LISTEN']} is not port health")
    readiness, liveness = c["readinessProbe"]["grpc"], c["livenessProbe"]["grpc"]
    assert readiness["port"] == ports["health"] and readiness.get("service") == "ready", (
        f"{run.label}: readiness must ask the health port for service 'ready': {readiness}")
    assert liveness["port"] == ports["health"] and liveness.get("service", "") == "", (
        f"{run.label}: liveness must ask the health port for service '': {liveness}")
    service = next(o for o in run.source.objects if o["kind"] == "Service"
                   and o["metadata"]["name"] == "tributary-coordinator")
    target = service["spec"]["ports"][0]["targetPort"]
    assert target in ports or target == ports["grpc"], f"{source}: Service targetPort {target}"


def pod_labels(obj: dict) -> list[dict]:
    labels = []
    for pod in pod_templates(obj):
        base = dict(pod.template.get("metadata", {}).get("labels", {}))
        if obj["kind"] == "StatefulSet":
            for i in range(obj["spec"].get("replicas", 1)):
                labels.append(base | {"statefulset.kubernetes.io/pod-name": f"{obj['metadata']['name']}-{i}"})
        else:
            labels.append(base)
    return labels


@pytest.mark.parametrize("source", SOURCES)
def test_selectors_match_pods_and_workload_selectors_match_their_templates(source):
    objs = get_source(source).objects
    all_labels = [lab for o in objs for lab in pod_labels(o)]
    errors = []
    for o in objs:
        if o["kind"] == "Service":
            selector = o["spec"].get("selector", {})
        elif o["kind"] == "PodDisruptionBudget":
            selector = o["spec"]["selector"].get("matchLabels", {})
        elif o["kind"] in ("Deployment", "StatefulSet"):
            selector = o["spec"]["selector"]["matchLabels"]
            template = o["spec"]["template"]["metadata"]["labels"]
            if not selector.items() <= template.items():
                errors.append(f"{describe(o)}: selector {selector} does not match its template {template}")
            continue
        else:
            continue
        if selector and not any(selector.items() <= lab.items() for lab in all_labels):
            errors.append(f"{describe(o)}: selector {selector} matches no pod in {source}")
    assert not errors, "\n".join(errors)


def test_dev_overlay_is_one_replica_on_the_memory_store_without_a_pdb():
    objs = get_source("overlays/dev").objects
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}, deployment["spec"]["strategy"]
    assert not [o for o in objs if o["kind"] in ("PodDisruptionBudget", "StatefulSet")]
    run = next(r for r in all_runs() if r.source.name == "overlays/dev")
    assert "TRIBUTARY_ETCD" not in run.env.values, "the dev overlay must run on the in-memory store"


@pytest.mark.parametrize("source", ["overlays/production", "overlays/external-etcd"])
def test_ha_overlays_run_two_coordinators_against_etcd_with_a_pdb(source):
    objs = get_source(source).objects
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    pdb = next(o for o in objs if o["kind"] == "PodDisruptionBudget"
               and o["metadata"]["name"] == "tributary-coordinator")
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"], (
        "a PDB that allows no disruption blocks every node drain")
    run = next(r for r in all_runs() if r.source.name == source and r.container["name"] == "coordinator")
    assert run.env.values.get("TRIBUTARY_ETCD"), f"{source}: no TRIBUTARY_ETCD"


def test_tls_component_mounts_the_files_it_points_at():
    run = next(r for r in all_runs() if r.source.name == "overlays/production-tls"
               and r.container["name"] == "coordinator")
    volumes = {v["name"]: v for v in run.pod.template["spec"]["volumes"]}
    for var, key in (("TRIBUTARY_TLS_CERT", "tls.crt"), ("TRIBUTARY_TLS_KEY", "tls.key")):
        path = run.env.values.get(var)
        assert path, f"{run.label}: {var} is not set"
        mount = next((m for m in run.container.get("volumeMounts", [])
                      if path == m["mountPath"].rstrip("/") + "/" + key), None)
        assert mount, f"{run.label}: {var}={path} is not {key} of a mounted volume"
        assert mount.get("readOnly") is True
        secret = volumes[mount["name"]].get("secret", {})
        assert secret.get("secretName") == "tributary-coordinator-tls", (
            f"{run.label}: {path} is not from Secret tributary-coordinator-tls")


@pytest.mark.parametrize("source", OVERLAY_AND_EXAMPLE_SOURCES)
def test_images_have_explicit_tags(source):
    errors = []
    for obj in get_source(source).objects:
        for pod in pod_templates(obj):
            for _, c in containers(pod.template):
                image = c["image"]
                tag = image.rsplit("/", 1)[-1].partition(":")[2]
                if "@sha256:" not in image and (not tag or tag == "latest"):
                    errors.append(f"{describe(obj)} container {c['name']}: image {image} has no fixed tag")
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("source", SOURCES)
def test_pods_run_as_non_root_without_privileges(source):
    errors = []
    for obj in get_source(source).objects:
        for pod in pod_templates(obj):
            pod_sc = pod.template["spec"].get("securityContext", {})
            for where, c in containers(pod.template):
                sc = c.get("securityContext", {})
                label = f"{describe(obj)} {where}[{c['name']}]"
                if not (sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True):
                    errors.append(f"{label}: runAsNonRoot is not true")
                if sc.get("allowPrivilegeEscalation") is not False:
                    errors.append(f"{label}: allowPrivilegeEscalation is not false")
                if "ALL" not in sc.get("capabilities", {}).get("drop", []):
                    errors.append(f"{label}: capabilities are not dropped (drop: [ALL])")
                seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
                if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
                    errors.append(f"{label}: no RuntimeDefault seccomp profile")
    assert not errors, "\n".join(errors)


def test_runtime_image_name_is_what_the_overlays_map():
    """The base says `image: tributary`; every overlay maps that name."""
    for d in kustomization_dirs():
        if "overlays" not in d.relative_to(K8S).parts:
            continue
        for obj in get_source(str(d.relative_to(K8S))).objects:
            for pod in pod_templates(obj):
                for _, c in containers(pod.template):
                    assert c["image"] != "tributary", (
                        f"{rel(d)}: {describe(obj)} keeps the placeholder image name `tributary`: "
                        "add an `images:` entry")
