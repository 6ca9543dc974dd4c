"""Checks the Helm chart (scripts/dist-test.sh runs it): `helm lint --strict` and `helm template` through Helm's own
Go SDK (PyPI's helm-python-sdk, Helm v4 as a shared library: no helm binary is on the package registries this
project reaches), then every rendered manifest validated against the Kubernetes OpenAPI schemas of one release in
strict mode (PyPI's kubernetes-validate, which ships the schemas). Several value sets: the minimum, the Ingress on,
identity on; and values that must fail (no PostgreSQL URL, no master key, neither token nor identity).
"""

import sys

import helm_python as helm
import kubernetes_validate
import yaml

CHART = sys.argv[1] if len(sys.argv) > 1 else "charts/agent-discover"
KUBE = "1.33.0"

MINIMUM = {
    "postgres": {"existingSecret": "team-db"},
    "masterKey": {"existingSecret": "team-key"},
    "dashboardToken": {"existingSecret": "team-token"},
}
INGRESS = {
    "postgres": {"url": "postgres://ad@db.example.com/ad?sslmode=verify-full&sslrootcert=system"},
    "masterKey": {"value": "00" * 32},
    "dashboardToken": {"value": "a-token"},
    "replicaCount": 3,
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "annotations": {"nginx.ingress.kubernetes.io/upstream-hash-by": "$http_mcp_session_id"},
        "hosts": [{"host": "mcp.example.com", "paths": [{"path": "/", "pathType": "Prefix"}]}],
        "tls": [{"secretName": "mcp-tls", "hosts": ["mcp.example.com"]}],
    },
}
IDENTITY = {
    "postgres": {"existingSecret": "team-db", "caSecret": "team-db-ca"},
    "masterKey": {"existingSecret": "team-key"},
    "identity": {
        "issuer": "https://login.example.com/oauth2/default",
        "requiredScopes": "mcp",
        "adminGroups": "mcp-admins",
        "introspection": {"url": "https://login.example.com/introspect", "clientId": "ad", "existingSecret": "idp"},
        "rules": '[groups.developers]\nservers = ["github"]\n',
    },
    "podDisruptionBudget": {"enabled": False},
}
MUST_FAIL = {
    "no PostgreSQL URL": {"masterKey": {"value": "00" * 32}, "dashboardToken": {"value": "t"}},
    "no master key": {"postgres": {"url": "postgres://h/db"}, "dashboardToken": {"value": "t"}},
    "neither token nor identity": {"postgres": {"url": "postgres://h/db"}, "masterKey": {"value": "00" * 32}},
}

failures = []


def check(name, values):
    report = helm.lint(CHART, values, strict=True, namespace="team")
    problems = [m for m in report.get("messages", []) if m.get("severity", 0) >= 2] + report.get("errors", [])
    if problems:
        failures.append(f"{name}: helm lint --strict: {problems}")
    with helm.Chart.load(CHART) as chart:
        rendered = chart.render(values, name="gw", namespace="team", is_install=True)
    kinds = []
    for path, text in sorted(rendered.items()):
        if not path.endswith(".yaml"):
            continue
        for doc in yaml.safe_load_all(text):
            if not doc:
                continue
            kinds.append(doc["kind"])
            try:
                kubernetes_validate.validate(doc, KUBE, strict=True)
            except Exception as e:  # the library's ValidationError and unknown kinds alike
                failures.append(f"{name}: {path} ({doc['kind']}): {e}")
    print(f"{name}: lint clean, rendered and valid against Kubernetes {KUBE}: {', '.join(kinds)}")
    return kinds


kinds = check("minimum", MINIMUM)
assert kinds.count("Deployment") == 1 and "Service" in kinds and "PodDisruptionBudget" in kinds, kinds
assert "Ingress" not in kinds and "Secret" not in kinds, kinds
kinds = check("ingress", INGRESS)
assert "Ingress" in kinds and "Secret" in kinds, kinds
kinds = check("identity", IDENTITY)
assert "ConfigMap" in kinds and "PodDisruptionBudget" not in kinds, kinds

for name, values in MUST_FAIL.items():
    with helm.Chart.load(CHART) as chart:
        try:
            chart.render(values, name="gw", namespace="team", is_install=True)
        except Exception as e:
            print(f"refused as it must be ({name}): {str(e).splitlines()[0][:160]}")
            continue
    failures.append(f"values with {name} rendered")

if failures:
    print("\n".join(failures), file=sys.stderr)
    sys.exit(1)
print("chart: all checks passed")
