-- A capture is analysed once: a real re-run gets a new analysis_id, so a
-- second row with the same one is a redelivery.
CREATE TABLE network_metrics (
    id                BIGSERIAL PRIMARY KEY,
    application_id    BIGINT NOT NULL REFERENCES apps_registry_application (id),
    analysis_id       UUID NOT NULL,
    analyzed_at       TIMESTAMPTZ NOT NULL,
    duration_seconds  DOUBLE PRECISION NOT NULL,
    total_packets     BIGINT NOT NULL,
    total_bytes       BIGINT NOT NULL,
    unique_hosts      INTEGER,
    dns_queries       INTEGER,
    tls_handshakes    INTEGER,
    avg_packet_size   DOUBLE PRECISION,
    protocols         JSONB,
    ingested_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT network_metrics_analysis_id_key UNIQUE (analysis_id)
);

CREATE INDEX network_metrics_application_id_idx ON network_metrics (application_id);
