# Hostcall server: slim, non-root, no test dependencies.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN useradd --create-home --uid 10001 hostcall
WORKDIR /app
COPY pyproject.toml README.md ./
COPY server ./server
COPY widget ./widget
COPY demo ./demo
# The dependencies come from pyproject; the code runs from /app (`python -m server`), where
# the widget and demo files sit beside it.
RUN pip install --no-cache-dir . && pip uninstall -y hostcall \
    && mkdir -p /data && chown hostcall /data

USER hostcall
EXPOSE 8000
VOLUME ["/data"]
# Set HOSTCALL_SECRET_KEYS in production; mount your agent files on /agents.
CMD ["python", "-m", "server", "serve", "--host", "0.0.0.0", "--port", "8000", "--agents", "/app/demo/agents", "--db", "/data/hostcall.db"]
