# Hostcall server: slim, non-root, no test dependencies, installed from the wheel.
# Not built in CI (no container engine there): tests/system/test_dockerfile.py checks what can
# be checked without one (the files it copies, the wheel it installs, the user, the command).
# The wheel carries the widget and the demo as package data (hostcall/assets.py), so the image
# holds no source tree: what runs here is exactly what `pip install hostcall` gives.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY server ./server
COPY widget ./widget
COPY demo ./demo
RUN pip wheel --no-cache-dir --no-deps -w /dist .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 10001 hostcall
COPY --from=build /dist /dist
RUN pip install --no-cache-dir /dist/*.whl && rm -rf /dist \
    && mkdir -p /data && chown hostcall /data
USER hostcall
WORKDIR /data
EXPOSE 8000
VOLUME ["/data"]
# /healthz answers 200 while the server runs (slim images have no curl: Python asks).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
# Set HOSTCALL_SECRET_KEYS in production; mount your agent files on /agents and add
# `--agents /agents` (without it the image serves the demo agents shipped in the package).
CMD ["hostcall", "serve", "--host", "0.0.0.0", "--port", "8000", "--db", "/data/hostcall.db"]
