-- The App API's changes to its registry (apps_registry_application), made
-- the way its Django makes them, for scenarios/production.sh. Each is one
-- statement run in autocommit, so one transaction; the scenario then stamps
-- the history row's `committed` (rel.registry_history, model.sql) once the
-- COMMIT has returned.

-- A new app, or a hard-deleted one registered again: a new id either way.
CREATE FUNCTION rel.app_register(pkg text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    x bigint;
BEGIN
    INSERT INTO apps_registry_application (package_name, name) VALUES (pkg, pkg) RETURNING id INTO x;
    INSERT INTO rel.registry_history (package_name, app_id, change, began) VALUES (pkg, x, 'registered', t0);
    RETURN x;
END $$;

-- Soft delete: the row stays, is_active goes false. The service has no
-- is_active filter: such an app's messages are still stored.
CREATE FUNCTION rel.app_soft_delete(pkg text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz := clock_timestamp();
    x bigint;
BEGIN
    UPDATE apps_registry_application SET is_active = false WHERE package_name = pkg RETURNING id INTO STRICT x;
    INSERT INTO rel.registry_history (package_name, app_id, change, began) VALUES (pkg, x, 'soft_deleted', t0);
    RETURN x;
END $$;

-- Django's Model.delete() with on_delete=CASCADE: Django, not the database,
-- deletes the dependent rows (app_stats, reviews, network_metrics), then the
-- app, in one transaction. The rows it deletes are kept in rel.deleted_rows:
-- the checker must not count them as lost. The service may write a row of
-- the app in between: the app's DELETE then fails on the foreign key
-- (23503), or the two transactions deadlock (40P01); Django's caller tries
-- again, as an admin would. Returns the attempts it took.
CREATE FUNCTION rel.app_hard_delete(pkg text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    t0 timestamptz;
    x bigint;
    tries int := 0;
BEGIN
    SELECT id INTO STRICT x FROM apps_registry_application WHERE package_name = pkg;
    LOOP
        tries := tries + 1;
        t0 := clock_timestamp();
        BEGIN
            WITH d AS (DELETE FROM app_stats WHERE application_id = x RETURNING crawled_at)
            INSERT INTO rel.deleted_rows (tbl, application_id, crawled_at, deleted_at)
            SELECT 'app_stats', x, crawled_at, t0 FROM d;
            WITH d AS (DELETE FROM reviews WHERE application_id = x RETURNING review_id, last_synced_at)
            INSERT INTO rel.deleted_rows (tbl, application_id, review_id, last_synced_at, deleted_at)
            SELECT 'reviews', x, review_id, last_synced_at, t0 FROM d;
            WITH d AS (DELETE FROM network_metrics WHERE application_id = x RETURNING analysis_id)
            INSERT INTO rel.deleted_rows (tbl, application_id, analysis_id, deleted_at)
            SELECT 'network_metrics', x, analysis_id, t0 FROM d;
            DELETE FROM apps_registry_application WHERE id = x;
            INSERT INTO rel.registry_history (package_name, app_id, change, began) VALUES (pkg, x, 'hard_deleted', t0);
            RETURN tries;
        EXCEPTION WHEN foreign_key_violation OR deadlock_detected THEN
            IF tries >= 50 THEN
                RAISE;
            END IF;
        END;
    END LOOP;
END $$;
