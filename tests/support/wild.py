"""Manifests in the shapes found in public example repositories, used unmodified: ports
without ``protocol``, ``---`` at the top of files, several documents per file, an
Ingress, resources and security contexts, a Job as an Argo CD PreSync hook. Written for
these tests (a guestbook of two objects, a small shop of eleven)."""

from tests.support.scenario import FAILURE_POLICY, release_yaml

GUESTBOOK = {
    "guestbook-ui-deployment.yaml": """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: guestbook-ui
spec:
  replicas: 1
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      app: guestbook-ui
  template:
    metadata:
      labels:
        app: guestbook-ui
    spec:
      containers:
      - image: example/guestbook-ui:0.2
        name: guestbook-ui
        ports:
        - containerPort: 80
""",
    "guestbook-ui-svc.yaml": """\
apiVersion: v1
kind: Service
metadata:
  name: guestbook-ui
spec:
  ports:
  - port: 80
    targetPort: 80
  selector:
    app: guestbook-ui
""",
}


def _deployment(name: str, image: str, port: int) -> str:
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels:
    app: {name}
spec:
  replicas: 2
  selector:
    matchLabels:
      app: {name}
  template:
    metadata:
      labels:
        app: {name}
    spec:
      serviceAccountName: shop
      securityContext:
        runAsNonRoot: true
        runAsUser: 1000
        fsGroup: 1000
      containers:
        - name: server
          image: {image}
          ports:
            - containerPort: {port}
          env:
            - name: PORT
              value: "{port}"
          envFrom:
            - configMapRef:
                name: shop-settings
          readinessProbe:
            httpGet:
              path: /healthz
              port: {port}
            initialDelaySeconds: 5
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
            limits:
              cpu: 200m
              memory: 128Mi
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
"""


def _service(name: str, port: int, target: int) -> str:
    return f"""\
apiVersion: v1
kind: Service
metadata:
  name: {name}
spec:
  type: ClusterIP
  selector:
    app: {name}
  ports:
  - name: http
    port: {port}
    targetPort: {target}
"""


def shop(frontend_image: str = "example/shop-frontend:v1", *, promo: bool = True) -> dict[str, str]:
    """The shop's files; ``promo=False`` drops the promotions ConfigMap (a prune)."""
    files = {
        "serviceaccount.yaml": "---\napiVersion: v1\nkind: ServiceAccount\nmetadata:\n"
        "  name: shop\n",
        "frontend.yaml": "---\n"
        + _deployment("frontend", frontend_image, 8080)
        + "---\n"
        + _service("frontend", 80, 8080),
        "cart.yaml": "---\n"
        + _deployment("cart", "example/shop-cart:v1", 7070)
        + "---\n"
        + _service("cart", 7070, 7070),
        "settings.yaml": """\
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: shop-settings
data:
  CURRENCY: EUR
  CART_ADDR: "cart:7070"
---
apiVersion: v1
kind: Secret
metadata:
  name: shop-payments
type: Opaque
stringData:
  PAYMENT_TOKEN: not-a-real-token
""",
        "ingress.yaml": """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  annotations:
    nginx.ingress.kubernetes.io/rewrite-target: /
spec:
  rules:
  - host: shop.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: frontend
            port:
              number: 80
""",
        "db-migrate.yaml": """\
apiVersion: batch/v1
kind: Job
metadata:
  name: db-migrate
  annotations:
    argocd.argoproj.io/hook: PreSync
    argocd.argoproj.io/hook-delete-policy: BeforeHookCreation
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: example/shop-migrate:v1
        args: ["--up"]
""",
    }
    if promo:
        files["promotions.yaml"] = (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: promotions\n"
            "data:\n  spring: '10%'\n"
        )
    return files


def release(name: str, *, cluster: str = "staging") -> str:
    """A Release of ``apps/<name>`` into namespace ``<name>``, created when missing."""
    spec = "  syncPolicy: {createNamespace: true}\n" + FAILURE_POLICY
    return release_yaml(name, cluster=cluster, spec_extra=spec)


def change(name: str, files: dict[str, str], drop: tuple[str, ...] = ()) -> dict[str, str | None]:
    """A commit's files: the Release ``name`` (see :func:`release`) with ``files`` as its
    source, and ``drop`` removed from it."""
    changed: dict[str, str | None] = {f"apps/{name}/{f}": t for f, t in files.items()}
    changed.update({f"apps/{name}/{f}": None for f in drop})
    changed[f"releases/{name}.yaml"] = release(name)
    return changed
