"""Prometheus metrics of `mtkit serve` (``GET /metrics``), in a registry of the app's own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mtkit.serve.models import ModelSet

#: paths counted by name; anything else (404s, static files) is counted as "other"
ENDPOINTS = ("/translate", "/detect", "/v1/translate", "/languages", "/v1/models", "/frontend/settings",
             "/health", "/", "/translate_file")


class ServerMetrics:
    def __init__(self, models: ModelSet):
        self.models = models
        self.registry = CollectorRegistry()
        self.requests = Counter("mtkit_requests", "HTTP requests by endpoint and status code",
                                ["endpoint", "status"], registry=self.registry)
        self.latency = Histogram("mtkit_request_seconds", "Time to answer a request", ["endpoint"],
                                 buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
                                 registry=self.registry)
        self.translated = Counter("mtkit_sentences", "Sentences translated", ["model"],
                                  registry=self.registry)
        self.queued = Gauge("mtkit_queued_sentences", "Sentences waiting for their model", ["model"],
                            registry=self.registry)
        self.batches = Gauge("mtkit_batches", "Batches the model has translated", ["model"],
                             registry=self.registry)
        self.mean_batch = Gauge("mtkit_mean_batch_sentences", "Mean sentences per batch over the last 1,000",
                                ["model"], registry=self.registry)

    def observe(self, path: str, status: int, seconds: float) -> None:
        endpoint = path if path in ENDPOINTS else "/download_file" if path.startswith("/download_file/") \
            else "other"
        self.requests.labels(endpoint, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def sentences(self, model: str, count: int) -> None:
        self.translated.labels(model).inc(count)

    def render(self) -> tuple[bytes, str]:
        for name, model in self.models.models.items():
            stats = model.batcher.stats
            self.queued.labels(name).set(model.batcher.queued_sentences)
            self.batches.labels(name).set(stats.batches)
            sizes = list(stats.batch_sizes)
            self.mean_batch.labels(name).set(sum(sizes) / len(sizes) if sizes else 0.0)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
