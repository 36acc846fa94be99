"""Settings read from the environment, with embedded defaults that run on a laptop.

APP_ENV is `development` (the default) or `production`; anything else is refused. Production
requires a real SECRET_KEY and explicit ALLOWED_HOSTS, turns DEBUG off and HTTPS on (redirect,
HSTS, secure cookies): `manage.py check --deploy --fail-level WARNING` passes with the variables
the README lists (tests/config/test_deploy.py runs it).
"""

from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF, UNSAFE_HASHES
from django.core.checks.security.base import (
    SECRET_KEY_INSECURE_PREFIX,
    SECRET_KEY_MIN_LENGTH,
    SECRET_KEY_MIN_UNIQUE_CHARACTERS,
)
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_list, env_pair, env_str
from memory.engine import configure as configure_database

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("APP_VAR_DIR", str(BASE_DIR / "var")))

APP_ENVS = ("development", "production")
APP_ENV = env_str("APP_ENV", "development")
if APP_ENV not in APP_ENVS:
    # A typo ("prod", "Production") must not silently mean development: DEBUG and the public key.
    raise ImproperlyConfigured(f"APP_ENV must be one of {', '.join(APP_ENVS)}; got {APP_ENV!r}.")
PRODUCTION = APP_ENV == "production"
_DEV_SECRET = "dev-insecure-secret-key-do-not-use-in-production"

SECRET_KEY = env_str("SECRET_KEY", _DEV_SECRET)
DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", [] if PRODUCTION else ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

if PRODUCTION:
    # The rule Django's deploy check applies to a key (security.W009), refused at start instead.
    if (
        not SECRET_KEY
        or SECRET_KEY == _DEV_SECRET
        or len(SECRET_KEY) < SECRET_KEY_MIN_LENGTH
        or len(set(SECRET_KEY)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS
        or SECRET_KEY.startswith(SECRET_KEY_INSECURE_PREFIX)
    ):
        raise ImproperlyConfigured(
            f"APP_ENV=production needs SECRET_KEY set to a random value of {SECRET_KEY_MIN_LENGTH}+ characters, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))'."
        )
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("APP_ENV=production needs ALLOWED_HOSTS.")

# --- HTTPS: on by default in production, each part can be turned off from the environment ---
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", PRODUCTION)
# Probes and scrapers inside the network speak plain HTTP: /health/ and /metrics (routed in
# governance/ops/urls.py) answer as they are. Patterns match the path without its leading slash.
SECURE_REDIRECT_EXEMPT = [r"^health/((live|ready)/)?$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", PRODUCTION)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", PRODUCTION)
# Behind a proxy that terminates TLS: the request header (as a request.META key) and the value that
# mean "the client used HTTPS", e.g. HTTP_X_FORWARDED_PROTO,https. Only set it when the proxy
# overwrites that header on every request; otherwise a client could claim HTTPS.
SECURE_PROXY_SSL_HEADER = env_pair("SECURE_PROXY_SSL_HEADER")
if SECURE_PROXY_SSL_HEADER and not SECURE_PROXY_SSL_HEADER[0].startswith("HTTP_"):
    raise ImproperlyConfigured(
        "SECURE_PROXY_SSL_HEADER names the header as Django sees it: HTTP_ + upper case with underscores, "
        f"e.g. HTTP_X_FORWARDED_PROTO,https; got {SECURE_PROXY_SSL_HEADER[0]!r}."
    )
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", PRODUCTION)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI assets served by the app: /api/docs/ works offline
    "simple_history",
    "axes",  # login throttling (see "Login throttling" below)
    "django_celery_beat",  # the job schedule, edited in the admin (governance.jobs.schedule)
    "memory",
    "governance",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",  # CONTENT_SECURITY_POLICY below
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "config.form_limits.FormLimitMiddleware",  # before CSRF: it reads the form first
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
    "config.request_log.RequestLogMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a refused login into the lockout page
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": configure_database(
        dj_database_url.parse(
            env_str("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
            conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
            conn_health_checks=True,
        ),
        var_dir=VAR_DIR,
    )
}

# --- Read replicas (memory.replicas; docs/operations.md "Read replicas") ---
# DATABASE_REPLICA_URLS: streaming standbys of DATABASE_URL, comma-separated; each becomes the alias
# replica_0, replica_1, ... Recall and the reviewers' read pages may read them; writes,
# transitions and forget stay on the primary. Unset: no router, no middleware, nothing changes.
# Under the test runner each replica mirrors the test database (tests that need a real standby
# point an alias at one themselves: tests/replica_support.py).
DATABASE_REPLICA_URLS = env_list("DATABASE_REPLICA_URLS", [])
for _number, _url in enumerate(DATABASE_REPLICA_URLS):
    _replica = configure_database(
        dj_database_url.parse(_url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60), conn_health_checks=True), var_dir=VAR_DIR
    )
    if _replica["ENGINE"] != DATABASES["default"]["ENGINE"] or "sqlite" in _replica["ENGINE"]:
        raise ImproperlyConfigured("DATABASE_REPLICA_URLS name PostgreSQL standbys of a PostgreSQL DATABASE_URL.")
    DATABASES[f"replica_{_number}"] = {**_replica, "TEST": {"MIRROR": "default"}}
DATABASE_ROUTERS = ["memory.engine.routing.ReplicaRouter"] if DATABASE_REPLICA_URLS else []
if DATABASE_REPLICA_URLS:
    # A request that wrote leaves its writer's read-your-writes position (memory.replicas).
    MIDDLEWARE.insert(MIDDLEWARE.index("axes.middleware.AxesMiddleware"), "config.replica_routing.ReadYourWritesMiddleware")
# How long a writer's own reads (an agent's, a reviewer's) need a replica that replayed its last write.
REPLICA_READ_YOUR_WRITES_SECONDS = env_int("REPLICA_READ_YOUR_WRITES_SECONDS", 30)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "review:home"
LOGOUT_REDIRECT_URL = "login"

# --- Login throttling (django-axes), on the reviewer login and the admin's alike ---
# LOGIN_FAILURE_LIMIT failed log-ins for one username (from any address), or from one address (for
# any usernames), refuse further log-ins for that username or address, right password included,
# until LOGIN_LOCKOUT_MINUTES have passed without another try. Attempts are rows in the database
# (admin -> Access attempts, where an admin can also lift a lockout early; or `manage.py
# axes_reset_username NAME`). Behind LOGIN_PROXY_COUNT reverse proxies the address is read from
# X-Forwarded-For (config.login_throttle.client_ip); without it, every client would share the
# proxy's address.
AUTHENTICATION_BACKENDS = [
    "config.login_throttle.LoginThrottleBackend",  # refuses a locked-out login; checks no password
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
LOGIN_PROXY_COUNT = env_int("LOGIN_PROXY_COUNT", 0)
AXES_CLIENT_IP_CALLABLE = "config.login_throttle.client_ip"
AXES_LOCKOUT_CALLABLE = "config.login_throttle.lockout_response"  # the login page again, with a message, 429
AXES_DISABLE_ACCESS_LOG = True  # keep failures only: a row per successful log-in would grow without end
AXES_VERBOSE = False  # no start-up banner in every command's log; failures are still logged (usernames masked)
if AXES_FAILURE_LIMIT < 1 or AXES_COOLOFF_TIME <= timedelta(0) or LOGIN_PROXY_COUNT < 0:
    raise ImproperlyConfigured("LOGIN_FAILURE_LIMIT and LOGIN_LOCKOUT_MINUTES must be positive, LOGIN_PROXY_COUNT 0 or more.")

# --- Content-Security-Policy (django-csp) on every response: scripts and styles only from this
# site's own files (no inline script or style, no eval), nothing may frame a page, no plugins.
# The API docs add `data:` images for Swagger UI's icons (config/urls.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        # One inline style attribute django-simple-history's admin history page carries
        # (`style="border-top: 0"`), allowed by its hash alone.
        "style-src-attr": [UNSAFE_HASHES, "'sha256-XMXSevYjgSjXgRafBFDvtjwX+yyWLrxfso9DcNZ9UXM='"],
        "img-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"  # filled by collectstatic (bin/run); WhiteNoise serves it
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]

REDIS_URL = env_str("REDIS_URL") or None

# One cache for every process (web workers, Celery): rate limits are per token, not per worker.
# Redis when REDIS_URL is set; else files under VAR_DIR, shared by every process on the machine.
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL, "KEY_PREFIX": "gm"}
        if REDIS_URL
        else {
            "BACKEND": "config.cache.FileCache",
            "LOCATION": str(VAR_DIR / "cache"),
            # Django culls a random third of the entries past MAX_ENTRIES (300 by default), which
            # would reset some tokens' rate-limit windows.
            "OPTIONS": {"MAX_ENTRIES": env_int("CACHE_MAX_ENTRIES", 10_000)},
        }
    )
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memory.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    # JSON in and out: any other request body is a 415, every response (and error) is JSON.
    "DEFAULT_PARSER_CLASSES": ["memory.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": env_int("API_PAGE_SIZE", 50),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "memory.api.problems.problem_exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["memory.api.throttling.CredentialRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"credential": env_str("API_THROTTLE_RATE", "600/min")},
    # Anonymous callers are limited by address: the peer's, or the one the LOGIN_PROXY_COUNT-th proxy
    # appended to X-Forwarded-For (DRF reads the whole header, which a client can forge, when unset).
    "NUM_PROXIES": LOGIN_PROXY_COUNT,
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}


def _package_version() -> str:
    """The package's version, the one source of truth for the API's: pyproject.toml in a source tree
    (current even in an editable install made before a bump), else the installed package's metadata."""
    import importlib.metadata
    import tomllib

    try:
        return tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["project"]["version"]
    except FileNotFoundError:
        return importlib.metadata.version("governed-memory")


SPECTACULAR_SETTINGS = {
    "TITLE": "Governed memory API",
    "DESCRIPTION": "Memories with provenance, authority, TTL, human review and provable forgetting.",
    "VERSION": _package_version(),
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # No badge from validator.swagger.io: the docs page loads nothing from other sites (CSP).
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "config.schema.problem_responses"],
}

# History is an audit trail: reverting a record to an old version from the admin would bypass the
# lifecycle services (and could bring forgotten content back).
SIMPLE_HISTORY_REVERT_DISABLED = True

# --- memory policy knobs (retention per kind lives in the database, not here) ---
MEMORY_MAX_CONTENT_CHARS = env_int("MEMORY_MAX_CONTENT_CHARS", 4000)
API_MAX_BODY_BYTES = env_int("API_MAX_BODY_BYTES", 1024 * 1024)  # larger bodies are a 413
API_MAX_JSON_DEPTH = env_int("API_MAX_JSON_DEPTH", 20)  # deeper JSON is a 400
MEMORY_RECALL_MAX_LIMIT = env_int("MEMORY_RECALL_MAX_LIMIT", 50)
MEMORY_UNUSED_AFTER_DAYS = env_int("MEMORY_UNUSED_AFTER_DAYS", 180)
# Recall writes last_used_at after its response, batched per process at most this often (memory.usage).
MEMORY_LAST_USED_FLUSH_SECONDS = env_float("MEMORY_LAST_USED_FLUSH_SECONDS", 2)
MEMORY_DRIFT_BATCH = env_int("MEMORY_DRIFT_BATCH", 20)
# With the `semantic` extra installed: build and activate a semantic index (through the gates) when
# none was ever built (bin/run, and the worker at start), and load the model in every web and
# worker process at start, so that no request waits for it (docs/operations.md).
SEMANTIC_AUTO_INDEX = env_bool("SEMANTIC_AUTO_INDEX", True)
SEMANTIC_LOAD_AT_START = env_bool("SEMANTIC_LOAD_AT_START", True)
# Threads the model runs on in each process (its ONNX Runtime session's, and the vector scans'): a web
# worker embeds one query at a time, and processes that each spread their embedding over every core
# wait on one another.
SEMANTIC_MODEL_THREADS = max(1, env_int("SEMANTIC_MODEL_THREADS", 1))
# The model's graph, exported from the installed package once (memory.search.encoder): a cache that
# holds no memory; every process on the machine reads the same file.
SEMANTIC_MODEL_DIR = env_str("SEMANTIC_MODEL_DIR", str(VAR_DIR / "models"))
# A semantic index's approximate nearest-neighbour files (memory.search.ann): a cache, rebuilt from
# the database; every process on the machine maps the same files.
SEMANTIC_ANN_DIR = env_str("SEMANTIC_ANN_DIR", str(VAR_DIR / "ann"))
SEMANTIC_ANN_SEARCH = env_bool("SEMANTIC_ANN_SEARCH", True)  # off: recall scans every vector of the scope
MEMORY_BACKUP_RETENTION_DAYS = env_int("MEMORY_BACKUP_RETENTION_DAYS", 35)
FORGET_FINGERPRINT_KEY = env_str(
    "FORGET_FINGERPRINT_KEY", ""
)  # HMAC key of forgotten subjects (memory.fingerprints); empty = derived from SECRET_KEY
# Forget ledger (governance.portability.ledger): append-only, outside the database and its backups; fingerprints only.
FORGET_LEDGER_PATH = env_str("FORGET_LEDGER_PATH", str(VAR_DIR / "forget-ledger.jsonl"))
# Without pg_repack, the disk_rewrite job runs plain VACUUM; True runs VACUUM FULL instead (locks each table meanwhile).
FORGET_DISK_VACUUM_FULL = env_bool("FORGET_DISK_VACUUM_FULL", False)
IDEMPOTENCY_KEY_RETENTION_HOURS = env_int("IDEMPOTENCY_KEY_RETENTION_HOURS", 72)  # the prune job deletes older keys

# --- Celery: Redis when REDIS_URL is set, else a filesystem broker that needs no server ---
# Every job is idempotent (it selects work by state and skips what is done) and runs under a lock,
# so the settings below choose "at least once": a message is acknowledged after the job ran, and
# a worker lost mid-job (kill -9, OOM) leaves it to be delivered again (by Redis; the filesystem
# broker forgets a message once taken, and beat's next tick finishes the work instead).
CELERY_BROKER_DIR = VAR_DIR / "broker"
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 660)  # hard: the child process is killed
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 600)  # the job fails cleanly first
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    # Redis redelivers an unacknowledged message once it is this old; it must outlast the longest
    # run, or a live job would be handed to a second worker (the job lock would then skip it).
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600)}
else:
    # The transport ignores the host; naming one spares kombu's "No hostname was supplied" warning.
    CELERY_BROKER_URL = "filesystem://localhost/"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_BROKER_DIR / "queue"),
        "data_folder_out": str(CELERY_BROKER_DIR / "queue"),
        "processed_folder": str(CELERY_BROKER_DIR / "processed"),
        "control_folder": str(CELERY_BROKER_DIR / "control"),  # kombu's default is relative to the cwd
        "store_processed": False,
    }
    # kombu's filesystem transport expects its folders to exist.
    for _folder in ("queue", "processed", "control"):
        (CELERY_BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
# One queue name per deployment (or test) sharing a Redis database.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True  # needs acks_late: requeue when the child process dies
# A job that raised or hit its soft limit recorded a failed JobRun; beat's next tick retries it,
# so acknowledging avoids a redelivery loop.
CELERY_TASK_ACKS_ON_FAILURE_OR_TIMEOUT = True
# With late acks a task cannot be acknowledged over a lost connection, and its message comes back:
# stop it instead of letting it finish in parallel with its redelivery (Celery 6's default).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1  # a long job must not sit on messages another worker could run
CELERY_WORKER_HIJACK_ROOT_LOGGER = False  # keep the JSON log lines of LOGGING in the worker and beat
CELERY_WORKER_REDIRECT_STDOUTS = False  # a traceback on stderr stays one block, not a log line per write
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Beat reads the schedule from the database (django-celery-beat), where admins see and edit it
# (admin -> Periodic tasks); governance.jobs.schedule seeds it from JOB_INTERVALS.
CELERY_BEAT_SCHEDULER = "governance.jobs.schedule:JobScheduler"
VAR_DIR.mkdir(parents=True, exist_ok=True)  # the app's files (forget ledger, file cache) live there
# Default interval (seconds) of each scheduled job; small values make a demo or a test see them run;
# 0 takes a job off the schedule (it can still be run with `manage.py run_job` or from the admin).
# These seed the schedule; JOB_<NAME>_INTERVAL set in the environment also pins that job's interval
# at each start of beat (see governance.jobs.schedule).
JOB_INTERVAL_DEFAULTS = {
    "expire": 60,
    "propagate_forgets": 30,
    "propose_duplicates": 3600,
    "prune": 6 * 3600,
    "golden_recall": 86400,  # every tenant's golden set on the active index
    "disk_rewrite": 3600,  # tables forgets touched, rewritten once per batch
    "alerts": 300,  # queue alerts and, once a day, the reviewers' digests
    "sweep_indexes": 300,  # search-index entries of records expired in time (governance.retention.sweep_indexes)
    "refresh_semantic_ann": 600,  # approximate nearest-neighbour partitions rebuilt once they drift
    "deliver_webhooks": 30,  # webhook retries that are due (new events wake a delivery at once)
}
JOB_INTERVAL_VARIABLES = {name: f"JOB_{name.upper()}_INTERVAL" for name in JOB_INTERVAL_DEFAULTS}
JOB_INTERVALS = {name: env_float(JOB_INTERVAL_VARIABLES[name], default) for name, default in JOB_INTERVAL_DEFAULTS.items()}
JOB_INTERVALS_FROM_ENV = sorted(name for name, variable in JOB_INTERVAL_VARIABLES.items() if (env_str(variable) or "").strip())
JOB_BATCH_SIZE = env_int("JOB_BATCH_SIZE", 2000)
# /health/ fails when a scheduled job's last success is older than FACTOR x interval + GRACE seconds.
JOB_STALE_AFTER_FACTOR = env_float("JOB_STALE_AFTER_FACTOR", 3)
JOB_STALE_GRACE_SECONDS = env_float("JOB_STALE_GRACE_SECONDS", 120)
JOB_RUN_RETENTION_DAYS = env_int("JOB_RUN_RETENTION_DAYS", 30)  # the prune job trims older JobRun rows
# The prune job keeps a content-free trace of each record it deletes (as-of reads report it as pruned)
# for this long, then deletes the trace too.
PRUNED_RECORD_TRACE_RETENTION_DAYS = env_int("PRUNED_RECORD_TRACE_RETENTION_DAYS", 400)
# 0 (the default) keeps the records' history for as long as its record (a memory's full history);
# N > 0: the prune job drops history older than N days, a calendar month at a time (a dropped
# PostgreSQL partition; SQLite deletes the rows), keeping each surviving record's state row.
# HISTORY_PARTITIONS_AHEAD: months of partitions made ahead.
HISTORY_RETENTION_DAYS = env_int("HISTORY_RETENTION_DAYS", 0)
HISTORY_PARTITIONS_AHEAD = env_int("HISTORY_PARTITIONS_AHEAD", 2)
# Events out (governance.events): the feed keeps events this long (an older cursor is a 410); webhooks.
EVENTS_RETENTION_DAYS = env_int("EVENTS_RETENTION_DAYS", 7)
# Webhook URLs may reach loopback and private addresses: for development and tests only
# (`check --deploy` refuses it).
WEBHOOKS_ALLOW_PRIVATE_NETWORKS = env_bool("WEBHOOKS_ALLOW_PRIVATE_NETWORKS", False)
WEBHOOKS_TIMEOUT_SECONDS = env_float("WEBHOOKS_TIMEOUT_SECONDS", 5)
WEBHOOKS_MAX_RESPONSE_BYTES = env_int("WEBHOOKS_MAX_RESPONSE_BYTES", 64 * 1024)
WEBHOOKS_DISABLE_AFTER_HOURS = env_float("WEBHOOKS_DISABLE_AFTER_HOURS", 72)  # an endpoint failing this long is disabled
WEBHOOKS_SECRET_OVERLAP_HOURS = env_float("WEBHOOKS_SECRET_OVERLAP_HOURS", 24)  # both secrets sign after a rotation
HEALTH_CHECK_TIMEOUT = env_float("HEALTH_CHECK_TIMEOUT", 2)  # seconds allowed to reach the broker
# /health/ says "starting" (200), not "fail", while the scheduled jobs have not yet run this long after start.
HEALTH_STARTUP_GRACE_SECONDS = env_float("HEALTH_STARTUP_GRACE_SECONDS", 180)
# Workers and beat touch a heartbeat file this often (`manage.py probe`, docs/deployment.md).
PROBE_HEARTBEAT_SECONDS = env_float("PROBE_HEARTBEAT_SECONDS", 10)

# --- email: queue alerts and the daily digest to reviewers (governance.alerts) ---
# The console backend in development (mails are printed); SMTP from the environment in production.
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if PRODUCTION else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "governed-memory@localhost")
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL", "http://localhost:8000").rstrip("/")  # links in emails
DIGEST_HOUR_UTC = env_int("DIGEST_HOUR_UTC", 7)  # the daily digest goes out at the first alerts run after this hour

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "filters": {
        "redact_exceptions": {"()": "config.request_log.RedactExceptionFilter"},
        "request_path_only": {"()": "config.request_log.RequestPathFilter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["redact_exceptions", "request_path_only"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django's own handlers (a plain-text console line with the traceback under DEBUG, mail to
        # ADMINS) go: its records propagate to the one JSON handler above.
        "django": {"handlers": [], "level": LOG_LEVEL},
        "django.db.backends": {"level": "WARNING"},
        # Our middleware logs every request (path only); Django adds a line for server errors.
        "django.request": {"level": "ERROR"},
        # runserver's access line repeats the request line, query string included.
        "django.server": {"handlers": [], "level": "ERROR", "propagate": False},
    },
}
