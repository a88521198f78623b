"""Offline checks of the monitoring pieces: the Grafana dashboard
(deploy/grafana/tributary.json), components/monitoring (ServiceMonitor,
PodMonitor, PrometheusRule, the dashboard's ConfigMap) and the metrics ports
of the coordinator and the example trainers.

- the dashboard parses, its panels have unique ids and non-overlapping places
  within Grafana's 24 columns, every query names the datasource variable;
- every metric a query or an alert names is in docs/METRICS.md, and every
  query and alert is valid PromQL (`promtool check rules`);
- the alerts behave (`promtool test rules`, deploy/tests/prometheusrule_test.yaml);
- the monitors' port names and selectors match the Service and the pods, the
  ports match TRIBUTARY_METRICS_LISTEN / TRIBUTARY_METRICS_PORT, and the
  hardened NetworkPolicy admits Prometheus to the metrics port.

Run from the repository root:  .venv/bin/python -m pytest -q deploy/tests
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from deploylib import DEPLOY, REPO, all_runs, get_source, rel, venv_dir

DASHBOARD = DEPLOY / "grafana" / "tributary.json"
METRICS_DOC = REPO / "docs" / "METRICS.md"
RULES_UNIT_TEST = Path(__file__).parent / "prometheusrule_test.yaml"
MONITORING = "overlays/production-monitoring"
HARDENED = "overlays/production-hardened"
COORDINATOR_OVERLAYS = ["overlays/production", "overlays/production-tls", "overlays/production-hardened",
                        "overlays/production-monitoring", "overlays/external-etcd", "overlays/dev"]
PROMETHEUS_NAMESPACE = {"kubernetes.io/metadata.name": "monitoring"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
# Grafana's variables, replaced by something of the same PromQL type before
# promtool sees a query. Dashboard variables are added from its templating.
GRAFANA_BUILTINS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
GRID_COLUMNS = 24


# ---------------------------------------------------------------- helpers


@lru_cache(maxsize=None)
def dashboard() -> dict:
    try:
        return json.loads(DASHBOARD.read_text())
    except json.JSONDecodeError as e:
        pytest.fail(f"{rel(DASHBOARD)} is not JSON: {e}")


def all_panels(panels: list[dict]) -> list[dict]:
    """Panels, with those inside collapsed rows."""
    out = []
    for p in panels:
        out.append(p)
        out += all_panels(p.get("panels", []))
    return out


def query_panels() -> list[dict]:
    return [p for p in all_panels(dashboard()["panels"]) if p.get("type") != "row"]


def targets() -> list[tuple[dict, dict]]:
    return [(p, t) for p in query_panels() for t in p.get("targets", [])]


def variables() -> dict[str, dict]:
    return {v["name"]: v for v in dashboard()["templating"]["list"]}


def variable_query(var: dict) -> str:
    query = var.get("query", "")
    return query.get("query", "") if isinstance(query, dict) else query


@lru_cache(maxsize=None)
def documented_metrics() -> dict[str, str]:
    """Metric name -> type, from the tables of docs/METRICS.md."""
    metrics = {}
    for line in METRICS_DOC.read_text().splitlines():
        m = re.match(r"^\|\s*`(tributary_[a-z_]+)`\s*\|\s*(counter|gauge|histogram)\s*\|", line)
        if m:
            metrics[m.group(1)] = m.group(2)
    assert len(metrics) > 10, f"{rel(METRICS_DOC)}: found only {sorted(metrics)} in its tables"
    return metrics


def undocumented(expr: str) -> set[str]:
    """Metric names in `expr` that docs/METRICS.md does not list; a histogram's
    _bucket, _sum and _count series count as the histogram."""
    docs = documented_metrics()
    missing = set()
    for name in set(re.findall(r"tributary_[a-z_]+", expr)):
        if name in docs:
            continue
        base = next((name[: -len(s)] for s in HISTOGRAM_SUFFIXES if name.endswith(s)), None)
        if base is None or docs.get(base) != "histogram":
            missing.add(name)
    return missing


def promtool() -> str:
    path = venv_dir() / "bin" / "promtool"
    if path.exists():
        return str(path)
    found = shutil.which("promtool")
    if not found:
        pytest.fail("promtool is missing: scripts/setup.sh unpacks it into .venv/bin/promtool")
    return found


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def substitute_variables(expr: str) -> str:
    """The query as Grafana sends it, with each variable replaced: the
    dashboard's own by a match-all regex, Grafana's intervals by durations.
    An unknown variable fails."""
    values = dict(GRAFANA_BUILTINS) | {name: ".*" for name in variables()}

    def replace(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise KeyError(name)
        return values[name]

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", replace, expr)


def objects(source: str, kind: str) -> list[dict]:
    return [o for o in get_source(source).objects if o["kind"] == kind]


def one(source: str, kind: str, name: str | None = None) -> dict:
    found = [o for o in objects(source, kind) if name is None or o["metadata"]["name"] == name]
    assert len(found) == 1, f"{source}: expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def coordinator_run(source: str):
    return next(r for r in all_runs() if r.source.name == source and r.container["name"] == "coordinator")


def named_ports(container: dict) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def selects(selector: dict, labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels and matchExpressions) against labels."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, vals = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"In": labels.get(key) in vals, "NotIn": labels.get(key) not in vals,
              "Exists": key in labels, "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True


# ---------------------------------------------------------------- dashboard


def test_dashboard_has_the_datasource_job_and_namespace_variables():
    d = dashboard()
    assert 36 <= d["schemaVersion"] <= 41, f"schemaVersion {d['schemaVersion']}"
    assert d.get("uid") and d.get("title"), "the dashboard needs a uid and a title"
    v = variables()
    assert v["datasource"]["type"] == "datasource" and v["datasource"]["query"] == "prometheus"
    assert v["job"]["type"] == "query"
    assert re.fullmatch(r"label_values\(\s*tributary_rank_samples_total\s*,\s*job\s*\)",
                        variable_query(v["job"])), variable_query(v["job"])
    for var in v.values():
        if var["type"] == "query":
            assert var["datasource"]["uid"] in ("${datasource}", "$datasource"), var["name"]
            assert not undocumented(variable_query(var)), (
                f"variable {var['name']}: {sorted(undocumented(variable_query(var)))} not in "
                f"{rel(METRICS_DOC)}")


def test_panel_ids_are_unique():
    ids = [p.get("id") for p in all_panels(dashboard()["panels"])]
    assert all(isinstance(i, int) for i in ids), f"panels without an integer id: {ids}"
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"{rel(DASHBOARD)}: panel ids used twice: {duplicates}"


def test_panels_fit_the_grid_without_overlapping():
    placed = []
    for p in all_panels(dashboard()["panels"]):
        g = p.get("gridPos")
        assert g, f"panel {p['id']} {p.get('title')!r} has no gridPos"
        assert g["x"] >= 0 and g["y"] >= 0 and g["w"] >= 1 and g["h"] >= 1, (p["id"], g)
        assert g["x"] + g["w"] <= GRID_COLUMNS, (
            f"panel {p['id']} {p.get('title')!r} ends at column {g['x'] + g['w']} > {GRID_COLUMNS}")
        placed.append((p, g))
    # Panels inside a collapsed row are placed when the row opens: check
    # only the top level, and each collapsed row's panels among themselves.
    top = [(p, g) for p, g in placed if p in dashboard()["panels"]]
    for i, (a, ga) in enumerate(top):
        for b, gb in top[i + 1:]:
            overlap = (ga["x"] < gb["x"] + gb["w"] and gb["x"] < ga["x"] + ga["w"]
                       and ga["y"] < gb["y"] + gb["h"] and gb["y"] < ga["y"] + ga["h"])
            assert not overlap, f"panels {a['id']} {a.get('title')!r} and {b['id']} {b.get('title')!r} overlap: {ga} {gb}"


def test_every_target_has_an_expr_and_the_datasource_variable():
    assert len(query_panels()) >= 15, "the dashboard has fewer panels than the operator needs"
    for p in query_panels():
        where = f"panel {p['id']} {p.get('title')!r}"
        assert p.get("targets"), f"{where} has no targets"
        assert p.get("datasource", {}).get("uid") in ("${datasource}", "$datasource"), (
            f"{where}: datasource {p.get('datasource')} is not the datasource variable")
        refs = [t.get("refId") for t in p["targets"]]
        assert len(set(refs)) == len(refs), f"{where}: refIds {refs}"
        for t in p["targets"]:
            assert t.get("expr", "").strip(), f"{where} target {t.get('refId')}: no expr"
            assert t.get("datasource", {}).get("uid") in ("${datasource}", "$datasource"), (
                f"{where} target {t.get('refId')}: datasource {t.get('datasource')} is not the "
                "datasource variable")


def test_dashboard_metrics_are_documented():
    errors = [f"panel {p['id']} {p.get('title')!r}: {sorted(undocumented(t['expr']))}"
              for p, t in targets() if undocumented(t["expr"])]
    assert not errors, f"metrics not listed in {rel(METRICS_DOC)}:\n" + "\n".join(errors)


def test_dashboard_covers_what_an_operator_needs():
    exprs = "\n".join(t["expr"] for _, t in targets())
    for needed in ("tributary_rank_data_wait_seconds_total", "tributary_rank_samples_total",
                   "tributary_coordinator_units_reassigned_total",
                   "tributary_coordinator_member_leases_expired_total",
                   "tributary_coordinator_leadership_changes_total", "tributary_coordinator_leader",
                   "tributary_coordinator_store_txn_duration_seconds_bucket",
                   "tributary_coordinator_store_txn_failures_total",
                   "tributary_coordinator_rpc_requests_total",
                   "tributary_coordinator_rpc_duration_seconds_bucket", "tributary_coordinator_jobs",
                   "tributary_coordinator_job_members", "tributary_coordinator_group_commit_ops",
                   "tributary_rank_fetch_duration_seconds_bucket",
                   "tributary_rank_fetch_requests_in_flight", "tributary_rank_bad_samples_total"):
        assert needed in exprs, f"no panel queries {needed}"


def write_rules(path: Path, groups: list[dict]) -> None:
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))


def test_dashboard_queries_are_valid_promql(tmp_path):
    rules, names = [], {}
    for p, t in targets():
        record = f"dashboard:panel{p['id']}:{t['refId']}"
        names[record] = f"panel {p['id']} {p.get('title')!r} target {t['refId']}: {t['expr']}"
        try:
            expr = substitute_variables(t["expr"])
        except KeyError as e:
            pytest.fail(f"{names[record]}: unknown variable ${e.args[0]}")
        rules.append({"record": record, "expr": expr})
    write_rules(tmp_path / "dashboard.rules.yaml", [{"name": "dashboard", "rules": rules}])
    proc = run_promtool("check", "rules", "dashboard.rules.yaml", cwd=tmp_path)
    output = proc.stdout + proc.stderr
    for record, where in names.items():
        output = output.replace(record, f"{record} ({where})")
    assert proc.returncode == 0, f"promtool check rules rejects dashboard queries:\n{output}"
    assert f"SUCCESS: {len(rules)} rules found" in proc.stdout, proc.stdout


def test_substitution_refuses_an_unknown_variable():
    with pytest.raises(KeyError):
        substitute_variables('rate(tributary_rank_samples_total{job=~"$jobb"}[5m])')
    assert substitute_variables("x[$__rate_interval]") == "x[5m]"


def test_promtool_rejects_invalid_promql(tmp_path):
    """The check above can fail: promtool is there and parses expressions."""
    write_rules(tmp_path / "bad.yaml", [{"name": "bad", "rules": [
        {"record": "dashboard:bad", "expr": "sum by (job) (rate(tributary_rank_samples_total[5m])"}]}])
    proc = run_promtool("check", "rules", "bad.yaml", cwd=tmp_path)
    assert proc.returncode != 0, proc.stdout


# ---------------------------------------------------------------- the dashboard's ConfigMap


def test_dashboard_configmap_is_the_file_labelled_for_the_sidecar():
    cm = one(MONITORING, "ConfigMap", "tributary-grafana-dashboard")
    assert cm["metadata"]["labels"].get("grafana_dashboard") == "1", cm["metadata"]["labels"]
    assert json.loads(cm["data"]["tributary.json"]) == dashboard()
    # kubectl's client-side apply keeps the whole object in an annotation,
    # and annotations are limited to 256 KiB in all.
    size = len(DASHBOARD.read_bytes())
    assert size < 200 * 1024, f"{rel(DASHBOARD)} is {size} bytes: too large for `kubectl apply`"


# ---------------------------------------------------------------- alerts


def prometheus_rule() -> dict:
    return one(MONITORING, "PrometheusRule", "tributary")


def alerts() -> dict[str, dict]:
    return {r["alert"]: r for g in prometheus_rule()["spec"]["groups"] for r in g["rules"] if "alert" in r}


def test_alert_rules_pass_promtool_check_rules(tmp_path):
    groups = prometheus_rule()["spec"]["groups"]
    write_rules(tmp_path / "rules.yaml", groups)
    proc = run_promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert proc.returncode == 0, f"promtool check rules:\n{proc.stdout}{proc.stderr}"
    count = sum(len(g["rules"]) for g in groups)
    assert f"SUCCESS: {count} rules found" in proc.stdout, proc.stdout


def test_alerts_are_the_expected_ones_with_severity_and_text():
    found = alerts()
    for name in ("TributaryNoLeader", "TributaryRankDataWaitHigh", "TributaryUnitsReassignedSpike",
                 "TributaryStoreTxnFailures"):
        assert name in found, f"no alert {name} (have {sorted(found)})"
    assert re.fullmatch(r"max by \(namespace\) \(tributary_coordinator_leader\) < 1",
                        found["TributaryNoLeader"]["expr"].strip()), found["TributaryNoLeader"]["expr"]
    assert found["TributaryNoLeader"]["for"] == "1m"
    for name, rule in found.items():
        assert rule.get("labels", {}).get("severity") in ("critical", "warning", "info"), name
        assert {"summary", "description"} <= rule.get("annotations", {}).keys(), name
        assert not undocumented(rule["expr"]), (
            f"alert {name}: {sorted(undocumented(rule['expr']))} not in {rel(METRICS_DOC)}")


def test_alerts_fire_as_the_unit_tests_expect(tmp_path):
    """promtool test rules with deploy/tests/prometheusrule_test.yaml against
    the rendered PrometheusRule's groups."""
    write_rules(tmp_path / "rules.yaml", prometheus_rule()["spec"]["groups"])
    spec = yaml.safe_load(RULES_UNIT_TEST.read_text())
    assert spec["rule_files"] == ["rules.yaml"], spec["rule_files"]
    tested = {a["alertname"] for case in spec["tests"] for a in case.get("alert_rule_test", [])}
    assert {"TributaryNoLeader", "TributaryRankDataWaitHigh"} <= tested, tested
    shutil.copy(RULES_UNIT_TEST, tmp_path / RULES_UNIT_TEST.name)
    proc = run_promtool("test", "rules", RULES_UNIT_TEST.name, cwd=tmp_path)
    assert proc.returncode == 0, f"promtool test rules {rel(RULES_UNIT_TEST)}:\n{proc.stdout}{proc.stderr}"


# ---------------------------------------------------------------- monitors and ports


@pytest.mark.parametrize("source", COORDINATOR_OVERLAYS)
def test_coordinator_serves_metrics_on_its_metrics_port(source):
    run = coordinator_run(source)
    listen = run.env.values.get("TRIBUTARY_METRICS_LISTEN")
    assert listen, f"{run.label}: TRIBUTARY_METRICS_LISTEN is not set: no /metrics"
    host, _, port = listen.rpartition(":")
    assert host in ("0.0.0.0", "[::]"), f"{run.label}: metrics on {listen}: Prometheus cannot reach it"
    assert named_ports(run.container).get("metrics") == int(port), (
        f"{run.label}: TRIBUTARY_METRICS_LISTEN={listen} is not container port metrics "
        f"({named_ports(run.container)})")
    service = one(source, "Service", "tributary-coordinator")
    metrics = [p for p in service["spec"]["ports"] if p["name"] == "metrics"]
    assert metrics and metrics[0]["targetPort"] in ("metrics", int(port)), (
        f"{source}: Service tributary-coordinator has no port metrics to container port metrics")


def test_service_monitor_scrapes_the_coordinator_service_metrics_port():
    monitor = one(MONITORING, "ServiceMonitor", "tributary-coordinator")
    service = one(MONITORING, "Service", "tributary-coordinator")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"], (
        "the ServiceMonitor looks in its own namespace (no namespaceSelector)")
    assert "namespaceSelector" not in monitor["spec"]
    assert selects(monitor["spec"]["selector"], service["metadata"]["labels"]), (
        f"ServiceMonitor selector {monitor['spec']['selector']} misses Service labels "
        f"{service['metadata']['labels']}")
    others = [s["metadata"]["name"] for s in objects(MONITORING, "Service")
              if s is not service and selects(monitor["spec"]["selector"], s["metadata"].get("labels", {}))]
    assert not others, f"the ServiceMonitor also selects {others}"
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in service_ports, (
            f"ServiceMonitor port {endpoint['port']!r} is not a port name of the Service ({service_ports})")
        assert endpoint.get("honorLabels") is True, "job-labelled series would lose `job` to exported_job"


def example_trainers():
    runs = [r for r in all_runs(include_bases=False)
            if r.source.name.startswith("examples/") and "TRIBUTARY_COORDINATOR" in r.env.values]
    assert {r.source.name for r in runs} >= {"examples/pytorchjob-elastic.yaml",
                                             "examples/statefulset-torchrun.yaml"}
    return runs


def test_pod_monitor_selects_the_example_trainers_on_their_metrics_port():
    monitor = one(MONITORING, "PodMonitor", "tributary-ranks")
    assert monitor["spec"].get("namespaceSelector") == {"any": True}, (
        "trainers run in their own namespaces: the PodMonitor must look in any")
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    assert all(e.get("honorLabels") is True for e in endpoints), "rank series would lose `job`"
    for run in example_trainers():
        labels = run.pod.template.get("metadata", {}).get("labels", {})
        assert selects(monitor["spec"]["selector"], labels), (
            f"{run.label}: pod labels {labels} are not selected by the PodMonitor "
            f"({monitor['spec']['selector']})")
        value = run.env.values.get("TRIBUTARY_METRICS_PORT")
        assert value and value.isdigit(), f"{run.label}: TRIBUTARY_METRICS_PORT={value!r}"
        ports = named_ports(run.container)
        for e in endpoints:
            assert ports.get(e["port"]) == int(value), (
                f"{run.label}: PodMonitor port {e['port']!r} is not container port "
                f"TRIBUTARY_METRICS_PORT={value} ({ports})")


def test_coordinator_pods_are_not_scraped_twice():
    monitor = one(MONITORING, "PodMonitor", "tributary-ranks")
    run = coordinator_run(MONITORING)
    assert not selects(monitor["spec"]["selector"], run.pod.template["metadata"]["labels"])


def admits(policy: dict, port: int, container: dict, pod_labels: dict[str, str],
           namespace_labels: dict[str, str], same_namespace: bool) -> bool:
    """Whether a NetworkPolicy lets a pod (labels, in a namespace with
    namespace_labels) reach `port` of a pod running `container`."""
    ports = named_ports(container)
    for rule in policy["spec"].get("ingress", []):
        rule_ports = {ports.get(p["port"]) if isinstance(p["port"], str) else p["port"]
                      for p in rule.get("ports", [])}
        if rule.get("ports") and port not in rule_ports:
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            if "ipBlock" in peer:
                continue
            if "namespaceSelector" in peer:
                ns_ok = selects(peer["namespaceSelector"], namespace_labels)
            else:
                ns_ok = same_namespace
            if ns_ok and selects(peer.get("podSelector", {}), pod_labels):
                return True
    return False


def test_network_policy_admits_prometheus_to_the_metrics_port_only():
    run = coordinator_run(HARDENED)
    policy = one(HARDENED, "NetworkPolicy", "tributary-coordinator")
    assert selects(policy["spec"]["podSelector"], run.pod.template["metadata"]["labels"])
    ports = named_ports(run.container)
    prometheus = {"app.kubernetes.io/name": "prometheus"}
    assert admits(policy, ports["metrics"], run.container, prometheus, PROMETHEUS_NAMESPACE, False), (
        f"{HARDENED}: Prometheus in namespace monitoring cannot reach the metrics port")
    assert not admits(policy, ports["grpc"], run.container, prometheus, PROMETHEUS_NAMESPACE, False), (
        f"{HARDENED}: Prometheus's namespace reaches the gRPC port")
    stranger_ns = {"kubernetes.io/metadata.name": "training"}
    assert not admits(policy, ports["metrics"], run.container, {}, stranger_ns, False), (
        f"{HARDENED}: the metrics port is open to every namespace")
    trainer = {"tributary.io/client": "true"}
    assert admits(policy, ports["grpc"], run.container, trainer, stranger_ns, False)
