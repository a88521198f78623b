"""Offline checks of overlays/production-hardened: etcd with TLS and client
certificates (components/etcd-tls), the NetworkPolicies
(components/network-policy), the bearer token (components/auth-token) and
the allowed dataset prefixes agree with the pods they govern and with the
example trainers.

Run from the repository root:  .venv/bin/python -m pytest -q deploy/tests
"""

from __future__ import annotations

import re

from deploylib import all_runs, etcd_argv, get_source, torchrun_argv

HARDENED = "overlays/production-hardened"
ETCD = {"app.kubernetes.io/name": "tributary", "app.kubernetes.io/component": "etcd"}
COORDINATOR = {"app.kubernetes.io/name": "tributary", "app.kubernetes.io/component": "coordinator"}
CLIENT_LABEL = ("tributary.io/client", "true")
AUTH_SECRET, AUTH_KEY = "tributary-auth", "token"


def run_of(container: str):
    return next(r for r in all_runs() if r.source.name == HARDENED
                and r.container["name"] == container)


def flags(argv: list[str]) -> dict[str, str]:
    out = {}
    for arg in argv:
        name, _, value = arg.removeprefix("--").partition("=")
        out[name] = value
    return out


def mounted_secret_file(run, path: str) -> str | None:
    """The Secret `path` is a key of, if a readOnly mount puts it there."""
    volumes = {v["name"]: v for v in run.pod.template["spec"].get("volumes", [])}
    for mount in run.container.get("volumeMounts", []):
        directory = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(directory) and "/" not in path[len(directory):]:
            secret = volumes.get(mount["name"], {}).get("secret")
            if secret and mount.get("readOnly") is True:
                return secret["secretName"]
    return None


def test_etcd_speaks_tls_to_clients_and_peers_and_demands_certificates():
    run = run_of("etcd")
    f = flags(etcd_argv(run.container, run.env.values))
    for name in ("listen-client-urls", "advertise-client-urls", "listen-peer-urls",
                 "initial-advertise-peer-urls"):
        assert f[name].startswith("https://"), f"{run.label}: --{name}={f[name]} is not https"
    for member in f["initial-cluster"].split(","):
        assert member.partition("=")[2].startswith("https://"), f"--initial-cluster {member}"
    assert "client-cert-auth" in f and "peer-client-cert-auth" in f
    expected = {"cert-file": "tributary-etcd-server-tls", "key-file": "tributary-etcd-server-tls",
                "trusted-ca-file": "tributary-etcd-server-tls",
                "peer-cert-file": "tributary-etcd-peer-tls",
                "peer-key-file": "tributary-etcd-peer-tls",
                "peer-trusted-ca-file": "tributary-etcd-peer-tls"}
    for name, secret in expected.items():
        assert name in f, f"{run.label}: no --{name}"
        assert mounted_secret_file(run, f[name]) == secret, (
            f"{run.label}: --{name}={f[name]} is not a file of Secret {secret}")
    # Probes stay on the plaintext metrics port.
    assert f["listen-metrics-urls"].startswith("http://")


def test_coordinator_calls_every_member_over_https_with_its_client_certificate():
    run = run_of("coordinator")
    env = run.env.values
    endpoints = env["TRIBUTARY_ETCD"].split(",")
    assert len(endpoints) == 3 and all(e.startswith("https://") for e in endpoints), endpoints
    hosts = {re.match(r"https://([^.:]+)", e).group(1) for e in endpoints}
    assert hosts == {"tributary-etcd-0", "tributary-etcd-1", "tributary-etcd-2"}, hosts
    for var, key in (("TRIBUTARY_ETCD_CA", "ca.crt"), ("TRIBUTARY_ETCD_CERT", "tls.crt"),
                     ("TRIBUTARY_ETCD_KEY", "tls.key")):
        path = env.get(var)
        assert path and path.endswith("/" + key), f"{run.label}: {var}={path!r}"
        assert mounted_secret_file(run, path) == "tributary-etcd-client-tls", (
            f"{run.label}: {var}={path} is not a file of Secret tributary-etcd-client-tls")


def policy(name: str) -> dict:
    objs = get_source(HARDENED).objects
    return next(o for o in objs if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == name)


def named_ports(container: dict) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def admitted(rule: dict, labels: dict[str, str], same_namespace: bool) -> bool:
    """Whether `rule` admits a pod with `labels` (ipBlocks admit nothing here)."""
    sources = rule.get("from")
    if not sources:
        return True
    for peer in sources:
        if "ipBlock" in peer:
            continue
        if "namespaceSelector" not in peer and not same_namespace:
            continue
        match = peer.get("podSelector", {}).get("matchLabels", {})
        if all(labels.get(k) == v for k, v in match.items()) and \
                not peer.get("podSelector", {}).get("matchExpressions"):
            return True
    return False


def open_ports(pol: dict, container: dict, labels: dict[str, str], same_namespace: bool) -> set[int]:
    ports = named_ports(container)
    out = set()
    for rule in pol["spec"].get("ingress", []):
        if admitted(rule, labels, same_namespace):
            for p in rule.get("ports", []):
                port = p["port"]
                out.add(ports[port] if isinstance(port, str) else port)
    return out


def probe_ports(container: dict) -> set[int]:
    ports = named_ports(container)
    out = set()
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        spec = container.get(probe)
        if spec:
            handler = spec.get("httpGet") or spec.get("grpc") or spec.get("tcpSocket")
            port = handler["port"]
            out.add(ports[port] if isinstance(port, str) else port)
    return out


def test_etcd_admits_only_the_coordinator_and_its_peers():
    run = run_of("etcd")
    pol = policy("tributary-etcd")
    assert pol["spec"]["podSelector"]["matchLabels"].items() <= \
        run.pod.template["metadata"]["labels"].items(), "the policy does not select the members"
    assert pol["spec"]["policyTypes"] == ["Ingress"]
    ports = named_ports(run.container)
    data = {ports["client"], ports["peer"]}
    stranger = {"app": "something-else"}
    trainer = dict([CLIENT_LABEL])
    assert not open_ports(pol, run.container, stranger, True) & data
    assert not open_ports(pol, run.container, trainer, False) & data
    assert open_ports(pol, run.container, COORDINATOR, True) & data == {ports["client"]}
    assert open_ports(pol, run.container, ETCD, True) >= data
    # The kubelet's probes reach the metrics port whatever their source.
    assert probe_ports(run.container) <= open_ports(pol, run.container, {}, False)


def test_coordinator_admits_only_labelled_trainers_and_probes():
    run = run_of("coordinator")
    pol = policy("tributary-coordinator")
    assert pol["spec"]["podSelector"]["matchLabels"].items() <= \
        run.pod.template["metadata"]["labels"].items()
    grpc = named_ports(run.container)["grpc"]
    trainer = dict([CLIENT_LABEL])
    assert grpc in open_ports(pol, run.container, trainer, False)
    assert grpc not in open_ports(pol, run.container, {"app": "something-else"}, True)
    assert grpc not in open_ports(pol, run.container, ETCD, True)
    assert probe_ports(run.container) <= open_ports(pol, run.container, {}, False)
    assert grpc not in probe_ports(run.container), "a probe on the gRPC port would be refused"


def test_example_trainers_carry_the_label_the_policy_admits():
    found = 0
    for run in all_runs(include_bases=False):
        if not run.source.name.startswith("examples/") or \
                "TRIBUTARY_COORDINATOR" not in run.env.values:
            continue
        found += 1
        labels = run.pod.template.get("metadata", {}).get("labels", {})
        assert labels.get(CLIENT_LABEL[0]) == CLIENT_LABEL[1], (
            f"{run.label}: calls the coordinator without label {CLIENT_LABEL[0]}: \"true\"")
    assert found, "no example calls the coordinator"


# ------------------------------------------------------------ bearer token


def mounted_secret_key(run, path: str) -> tuple[str, str] | None:
    """(Secret, key) whose value a readOnly Secret volume puts at `path`,
    following the volume's `items` when it lists them; None when no mounted
    Secret key is there."""
    volumes = {v["name"]: v for v in run.pod.template["spec"].get("volumes", [])}
    for mount in run.container.get("volumeMounts", []):
        directory = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(directory) or mount.get("subPath") or mount.get("readOnly") is not True:
            continue
        secret = volumes.get(mount["name"], {}).get("secret")
        if not secret:
            continue
        relative = path[len(directory):]
        items = secret.get("items")
        if items is None:
            return (secret["secretName"], relative) if "/" not in relative else None
        for item in items:
            if item["path"] == relative:
                return secret["secretName"], item["key"]
    return None


def example_clients():
    """The example containers that call the coordinator."""
    return [run for run in all_runs(include_bases=False)
            if run.source.name.startswith("examples/") and "TRIBUTARY_COORDINATOR" in run.env.values]


def test_coordinator_reads_its_bearer_token_from_the_mounted_secret():
    run = run_of("coordinator")
    path = run.env.values.get("TRIBUTARY_AUTH_TOKEN_FILE")
    assert path, f"{run.label}: TRIBUTARY_AUTH_TOKEN_FILE is not set: any caller would be served"
    assert mounted_secret_key(run, path) == (AUTH_SECRET, AUTH_KEY), (
        f"{run.label}: TRIBUTARY_AUTH_TOKEN_FILE={path} is not key {AUTH_KEY!r} of Secret "
        f"{AUTH_SECRET} mounted readOnly")
    volume = next(v for v in run.pod.template["spec"]["volumes"]
                  if v.get("secret", {}).get("secretName") == AUTH_SECRET)
    assert not volume["secret"].get("optional"), (
        f"{run.label}: Secret {AUTH_SECRET} is optional: without it the coordinator cannot start")
    assert volume["secret"].get("defaultMode", 0o644) & 0o007 == 0, (
        f"{run.label}: the token file is readable by others (defaultMode "
        f"{oct(volume['secret']['defaultMode'])})")


def test_example_trainers_send_their_jobs_credential_never_the_operator_token():
    runs = example_clients()
    assert {r.source.name for r in runs} >= {"examples/pytorchjob-elastic.yaml",
                                             "examples/statefulset-torchrun.yaml"}, runs
    errors = []
    for run in runs:
        path = run.env.values.get("TRIBUTARY_AUTH_TOKEN_FILE")
        if not path:
            errors.append(f"{run.label}: calls the coordinator without TRIBUTARY_AUTH_TOKEN_FILE: "
                          "the hardened coordinator refuses every call (UNAUTHENTICATED)")
            continue
        if "TRIBUTARY_AUTH_TOKEN" in run.env.values:
            errors.append(f"{run.label}: sets both TRIBUTARY_AUTH_TOKEN and TRIBUTARY_AUTH_TOKEN_FILE")
        args = [str(a) for a in run.container.get("command", []) + run.container.get("args", [])]
        job = next((a.split("=", 1)[1] for a in args if a.startswith("--job=")), None)
        want = (f"tributary-job-{job}", AUTH_KEY)
        found = mounted_secret_key(run, path)
        if found != want:
            errors.append(f"{run.label}: TRIBUTARY_AUTH_TOKEN_FILE={path} is not key {AUTH_KEY!r} of "
                          f"its job's Secret {want[0]} mounted readOnly (found {found}); a trainer "
                          f"never holds the operator token ({AUTH_SECRET})")
    assert not errors, "\n".join(errors)


# ------------------------------------------------------- allowed datasets


def allowed_prefixes(value: str) -> list[str]:
    """The prefixes as the coordinator keeps them (auth::DatasetPolicy): each
    ends with `/`, so a prefix matches at a path boundary."""
    prefixes = []
    for raw in value.split(","):
        raw = raw.strip()
        if raw:
            prefixes.append(raw if raw.endswith("/") else raw + "/")
    return prefixes


def dataset_urls(run) -> list[str]:
    """The --dataset values the trainer script gets (what CreateJob names)."""
    argv = torchrun_argv(run.container, run.env.values) or []
    urls = []
    for i, arg in enumerate(argv):
        if arg.startswith("--dataset="):
            urls.append(arg.partition("=")[2])
        elif arg == "--dataset" and i + 1 < len(argv):
            urls.append(argv[i + 1])
    return urls


def test_allowed_dataset_prefixes_cover_the_examples_datasets():
    run = run_of("coordinator")
    value = run.env.values.get("TRIBUTARY_ALLOWED_DATASETS", "")
    prefixes = allowed_prefixes(value)
    assert prefixes, f"{run.label}: TRIBUTARY_ALLOWED_DATASETS is not set: CreateJob may name any URL"
    for prefix in prefixes:
        assert re.match(r"^[a-z][a-z0-9+.-]*://[^/]+/", prefix) or prefix.startswith("/"), (
            f"{run.label}: allowed dataset prefix {prefix!r} is neither a URL nor an absolute path")
        assert ".." not in prefix.split("/"), f"{run.label}: allowed dataset prefix {prefix!r}"
    checked, errors = 0, []
    for client in example_clients():
        for url in dataset_urls(client):
            checked += 1
            if ".." in url.split("/") or not any(url.startswith(p) for p in prefixes):
                errors.append(f"{client.label}: --dataset {url} is under no allowed prefix "
                              f"({value}): the hardened coordinator refuses its CreateJob")
    assert checked, "no example trainer names a --dataset"
    assert not errors, "\n".join(errors)
