-- The App API's applications table, which storage-consumer only reads
-- (docs/OPERATIONS.md: Schema). deploy/compose.yaml loads this into an
-- empty database; where the App API runs, its own migrations create the
-- table instead.
CREATE TABLE IF NOT EXISTS apps_registry_application (
    id BIGSERIAL PRIMARY KEY,
    package_name VARCHAR(255) NOT NULL UNIQUE,
    name VARCHAR(255),
    is_active BOOLEAN NOT NULL DEFAULT true,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
