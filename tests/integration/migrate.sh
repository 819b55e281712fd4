#!/usr/bin/env bash
# `storage-consumer migrate` against a real PostgreSQL 15 (DESIGN.md: Tables and natural keys; Migrations): the
# schema it creates, idempotence, the pre-flight for the App API's table, two
# instances racing, edited migrations, all-or-nothing failure, no password in
# its errors, and settings validated before the database is touched.
#
# Every test works in its own database (fresh_db) on the suite's server.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pg_start
broker_start

# The tables storage-consumer owns (DESIGN.md: Tables and natural keys) and its tracking table (DESIGN.md: Migrations).
OWN_TABLES="app_stats reviews network_metrics dead_letter_events consumer_offsets applied_tombstones storage_consumer_migrations"
DATA_TABLES="app_stats reviews network_metrics"
MIGRATION_NAMES="0001_app_stats.sql
0002_reviews.sql
0003_network_metrics.sql
0004_dead_letter_events.sql
0005_dead_letter_resolution.sql
0006_consumer_offsets.sql
0007_dead_letter_acknowledgement.sql
0008_reviews_fillfactor.sql
0009_dead_letter_record_identity.sql
0010_position_fence.sql
0011_applied_tombstones.sql"
MIGRATION_COUNT=$(wc -l <<<"$MIGRATION_NAMES")

# Run `storage-consumer migrate` against $DB with only the given STORAGE_*
# settings (anything STORAGE_* in the caller's environment is dropped, so a
# developer's shell cannot change the outcome). stdout goes to PREFIX.out,
# stderr to PREFIX.err; returns the exit status (124: it hung).
#   migrate_to PREFIX [NAME=value ...]
migrate_to() {
    local prefix=$1 v
    shift
    local unset=()
    for v in $(compgen -e | grep '^STORAGE_' || true); do unset+=(-u "$v"); done
    env "${unset[@]}" STORAGE_DATABASE_URL="$DB" "$@" \
        timeout 60 "$BIN" migrate >"$prefix.out" 2>"$prefix.err"
}

# migrate_ok PREFIX: migrate must succeed.
migrate_ok() {
    local rc=0
    migrate_to "$@" || rc=$?
    [ "$rc" -eq 0 ] || fail "migrate exited $rc: $(cat "$1.err")"
}

# Prints the storage-consumer tables (and tracking table) that exist in $DB.
existing_own_tables() {
    local t
    for t in $OWN_TABLES; do
        [ "$(sql "SELECT to_regclass('$t') IS NOT NULL")" = t ] && echo "$t"
    done
    return 0
}

# One line per column of TABLE: "name type[ NOT NULL][ DEFAULT expr]", the
# type as format_type prints it, in column order.
columns_of() { # table
    sql "SELECT c.column_name || ' ' || format_type(a.atttypid, a.atttypmod)
                || CASE WHEN c.is_nullable = 'NO' THEN ' NOT NULL' ELSE '' END
                || COALESCE(' DEFAULT ' || c.column_default, '')
           FROM information_schema.columns c
           JOIN pg_attribute a
             ON a.attrelid = format('%I.%I', c.table_schema, c.table_name)::regclass
            AND a.attname = c.column_name
          WHERE c.table_schema = current_schema() AND c.table_name = '$1'
          ORDER BY c.ordinal_position"
}

# Every column DESIGN.md: Tables and natural keys defines for TABLE must exist exactly as written there.
# DESIGN.md: Tables and natural keys: "the migrations may add more, never fewer" — extra columns are
# allowed, a missing or different one is not.
assert_columns() { # table expected-lines
    local table=$1 expected=$2 actual line
    actual=$(columns_of "$table")
    [ -n "$actual" ] || fail "table $table does not exist"
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        grep -qxF -- "$line" <<<"$actual" ||
            fail "$table: expected column [$line]; the table has:
$actual"
    done <<<"$expected"
}

# The column lists of TABLE's plain (non-partial, non-deferrable, non-primary)
# unique indexes, each sorted, one per line: the arbiters ON CONFLICT can use.
unique_keys_of() { # table
    sql "SELECT string_agg(a.attname, ',' ORDER BY a.attname)
           FROM pg_index i
           CROSS JOIN LATERAL unnest(i.indkey::int2[]) AS k(attnum)
           JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
          WHERE i.indrelid = '$1'::regclass
            AND i.indisunique AND NOT i.indisprimary AND i.indimmediate
            AND i.indpred IS NULL AND i.indexprs IS NULL
          GROUP BY i.indexrelid
          ORDER BY 1"
}

assert_unique_key() { # table sorted-comma-columns
    local keys
    keys=$(unique_keys_of "$1")
    grep -qxF -- "$2" <<<"$keys" || fail "$1: no UNIQUE key on ($2); unique keys: [$keys]"
}

# DESIGN.md: Tables and natural keys's column definitions, written out here on purpose (not derived from
# the migration files): a migration that drifts from the design must fail.
SPEC_APP_STATS="id bigint NOT NULL DEFAULT nextval('app_stats_id_seq'::regclass)
application_id bigint NOT NULL
crawled_at timestamp with time zone NOT NULL
title character varying(255)
score double precision
ratings_count bigint
reviews_count bigint
min_installs bigint
real_installs bigint
histogram bigint[]
price numeric(12,2)
is_free boolean
version character varying(64)
app_updated_at timestamp with time zone
ingested_at timestamp with time zone NOT NULL DEFAULT now()"

SPEC_REVIEWS="id bigint NOT NULL DEFAULT nextval('reviews_id_seq'::regclass)
application_id bigint NOT NULL
review_id character varying(255) NOT NULL
user_name character varying(255)
content text
score smallint NOT NULL
thumbs_up_count integer NOT NULL
app_version character varying(64)
reviewed_at timestamp with time zone NOT NULL
reply_content text
replied_at timestamp with time zone
first_seen_at timestamp with time zone NOT NULL DEFAULT now()
last_synced_at timestamp with time zone NOT NULL
sentiment character varying(16)
sentiment_score real"

SPEC_NETWORK_METRICS="id bigint NOT NULL DEFAULT nextval('network_metrics_id_seq'::regclass)
application_id bigint NOT NULL
analysis_id uuid NOT NULL
analyzed_at timestamp with time zone NOT NULL
duration_seconds double precision NOT NULL
total_packets bigint NOT NULL
total_bytes bigint NOT NULL
unique_hosts integer
dns_queries integer
tls_handshakes integer
avg_packet_size double precision
protocols jsonb
ingested_at timestamp with time zone NOT NULL DEFAULT now()"

SPEC_DEAD_LETTER_EVENTS="id bigint NOT NULL DEFAULT nextval('dead_letter_events_id_seq'::regclass)
topic character varying(255) NOT NULL
partition integer NOT NULL
kafka_offset bigint NOT NULL
kafka_timestamp timestamp with time zone
message_key bytea
payload bytea NOT NULL
payload_size integer NOT NULL
error_type character varying(64) NOT NULL
error_detail text NOT NULL
created_at timestamp with time zone NOT NULL DEFAULT now()
record_digest bytea NOT NULL"

# The progress record (DESIGN.md: Progress in the database).
SPEC_CONSUMER_OFFSETS="group_id text NOT NULL
topic text NOT NULL
partition integer NOT NULL
next_offset bigint NOT NULL
epoch bigint NOT NULL DEFAULT 0
updated_at timestamp with time zone NOT NULL DEFAULT now()"

test_fresh_apply_creates_the_spec_schema() {
    fresh_db mig_fresh
    create_applications_table
    migrate_ok "$WORK/fresh"

    assert_columns app_stats "$SPEC_APP_STATS"
    assert_columns reviews "$SPEC_REVIEWS"
    assert_columns network_metrics "$SPEC_NETWORK_METRICS"
    assert_columns dead_letter_events "$SPEC_DEAD_LETTER_EVENTS"
    assert_columns consumer_offsets "$SPEC_CONSUMER_OFFSETS"
    assert_eq "group_id,partition,topic" \
        "$(sql "SELECT string_agg(a.attname, ',' ORDER BY a.attname)
                  FROM pg_constraint c
                  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                 WHERE c.conrelid = 'consumer_offsets'::regclass AND c.contype = 'p'")" \
        "consumer_offsets: primary key"

    local t
    for t in app_stats reviews network_metrics dead_letter_events; do
        assert_eq id "$(sql "SELECT string_agg(a.attname, ',')
                               FROM pg_constraint c
                               JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY (c.conkey)
                              WHERE c.conrelid = '$t'::regclass AND c.contype = 'p'")" \
            "$t: primary key"
    done

    # The natural keys every INSERT ... ON CONFLICT names (DESIGN.md: Tables and natural keys).
    assert_unique_key app_stats "application_id,crawled_at"
    assert_unique_key reviews "review_id"
    assert_unique_key network_metrics "analysis_id"
    assert_unique_key dead_letter_events "kafka_offset,partition,record_digest,topic"

    for t in $DATA_TABLES; do
        # The only foreign key: application_id -> apps_registry_application(id).
        assert_eq "application_id->apps_registry_application(id)" \
            "$(sql "SELECT string_agg(a.attname || '->' || c.confrelid::regclass || '(' || fa.attname || ')', ' ')
                      FROM pg_constraint c
                      JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]
                      JOIN pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = c.confkey[1]
                     WHERE c.conrelid = '$t'::regclass AND c.contype = 'f'
                       AND cardinality(c.conkey) = 1")" \
            "$t: foreign key"
        assert_eq 1 "$(sql "SELECT count(*) FROM pg_constraint WHERE conrelid = '$t'::regclass AND contype = 'f'")" \
            "$t: number of foreign keys"
        # PostgreSQL does not index foreign keys by itself (DESIGN.md: Tables and natural keys).
        local idx
        idx=$(sql "SELECT count(*)
                     FROM pg_index i
                     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
                    WHERE i.indrelid = '$t'::regclass AND a.attname = 'application_id'
                      AND i.indpred IS NULL")
        [ "$idx" -ge 1 ] || fail "$t: no index whose first column is application_id"
    done

    # The tracking table: one row per file, in order, each with the md5 of the
    # file (DESIGN.md: Migrations: so an operator can recompute it and an edit is detected).
    assert_eq "$MIGRATION_NAMES" "$(sql "SELECT name FROM storage_consumer_migrations ORDER BY name")" \
        "applied migrations"
    assert_eq "$MIGRATION_COUNT" "$(sql "SELECT count(*) FROM storage_consumer_migrations WHERE checksum ~ '^[0-9a-f]{32}\$'")" \
        "32-hex-digit checksums"
    local name sum
    while IFS= read -r name; do
        sum=$(md5sum <"$TOP/migrations/$name" | cut -d' ' -f1)
        assert_eq "$sum" "$(sql "SELECT checksum FROM storage_consumer_migrations WHERE name = '$name'")" \
            "checksum of $name"
    done <<<"$MIGRATION_NAMES"
}

test_applying_again_is_a_no_op() {
    fresh_db mig_again
    create_applications_table
    migrate_ok "$WORK/again1"
    local before schema_before
    before=$(sql "SELECT name, checksum, applied_at FROM storage_consumer_migrations ORDER BY name")
    schema_before=$(sql "SELECT relname, relkind FROM pg_class
                          WHERE relnamespace = 'public'::regnamespace ORDER BY 1")
    assert_eq "$MIGRATION_COUNT" "$(wc -l <<<"$before")" "rows after the first run"

    migrate_ok "$WORK/again2"
    assert_eq "$before" \
        "$(sql "SELECT name, checksum, applied_at FROM storage_consumer_migrations ORDER BY name")" \
        "storage_consumer_migrations after the second run"
    assert_eq "$schema_before" \
        "$(sql "SELECT relname, relkind FROM pg_class
                 WHERE relnamespace = 'public'::regnamespace ORDER BY 1")" \
        "relations after the second run"
}

# Without the App API's registry, the service's own tables are created and
# the built-in pipelines' tables, which reference it, wait for it: a
# deployment whose pipelines are its own needs no registry. The first
# migrate after the registry exists creates them.
test_without_the_registry_the_builtin_pipelines_tables_wait_for_it() {
    fresh_db mig_noapps
    local rc=0
    migrate_to "$WORK/noapps" || rc=$?
    assert_eq 0 "$rc" "exit status: $(cat "$WORK/noapps.err")"
    assert_contains "$(cat "$WORK/noapps.err")" "the built-in pipelines' tables are not created"
    assert_eq "dead_letter_events consumer_offsets applied_tombstones storage_consumer_migrations" \
        "$(existing_own_tables | xargs)" "tables created without apps_registry_application"
    assert_eq "" "$(sql "SELECT name FROM storage_consumer_migrations WHERE name IN ('0001_app_stats.sql',
                          '0002_reviews.sql', '0003_network_metrics.sql', '0008_reviews_fillfactor.sql')")" \
        "the waiting migrations recorded"
    # The built-in pipelines say what they need.
    rc=0
    env STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1 timeout 60 "$BIN" run \
        >"$WORK/noapps-run.out" 2>"$WORK/noapps-run.err" || rc=$?
    assert_eq 1 "$rc" "run of the built-in pipelines without the registry"
    assert_contains "$(cat "$WORK/noapps-run.err")" "table apps_registry_application does not exist: apply the App API migrations first"
    create_applications_table >/dev/null
    rc=0
    migrate_to "$WORK/noapps-again" || rc=$?
    assert_eq 0 "$rc" "exit status once the registry exists"
    assert_eq "$(echo $OWN_TABLES)" "$(existing_own_tables | xargs)" "tables once the registry exists"
}

# Both processes are started together and waited for; each must exit 0 and
# every file must be recorded once. `rounds` plain races in fresh databases,
# then one round where the overlap is forced: a session holds a lock the
# first migration needs (an FK to apps_registry_application) until both
# processes are inside their migration transaction, so neither can finish
# before the other has started.
race_once() { # db-name forced(0|1)
    local db=$1 forced=$2 holder="" pa pb ra=0 rb=0
    fresh_db "$db"
    create_applications_table
    if [ "$forced" = 1 ]; then
        psql "$DB" -X -q -v ON_ERROR_STOP=1 \
            -c "BEGIN; LOCK TABLE apps_registry_application IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT" \
            >/dev/null 2>&1 &
        holder=$!
        wait_until "the lock holder holds its lock" \
            "[ \"\$(sql \"SELECT count(*) FROM pg_locks WHERE relation = 'apps_registry_application'::regclass AND mode = 'AccessExclusiveLock' AND granted\")\" = 1 ]"
    fi
    migrate_to "$WORK/$db.a" &
    pa=$!
    migrate_to "$WORK/$db.b" &
    pb=$!
    if [ "$forced" = 1 ]; then
        # Both must be blocked inside the database before the lock goes.
        wait_until "both migrate processes waiting on a lock" \
            "[ \"\$(sql \"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'storage-consumer' AND wait_event_type = 'Lock'\")\" = 2 ]"
        sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity
              WHERE datname = current_database() AND query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()" >/dev/null
        wait "$holder" || true
    fi
    wait "$pa" || ra=$?
    wait "$pb" || rb=$?
    [ "$ra" -eq 0 ] || fail "$db: first migrate exited $ra: $(cat "$WORK/$db.a.err")"
    [ "$rb" -eq 0 ] || fail "$db: second migrate exited $rb: $(cat "$WORK/$db.b.err")"
    assert_eq "$MIGRATION_NAMES" "$(sql "SELECT name FROM storage_consumer_migrations ORDER BY name")" \
        "$db: applied migrations"
}


test_two_migrate_processes_started_together_apply_each_file_once() {
    local i
    for i in 1 2 3 4 5; do
        race_once "mig_race_$i" 0
    done
    race_once mig_race_forced 1
}

test_an_edited_applied_migration_is_refused() {
    fresh_db mig_edited
    create_applications_table
    migrate_ok "$WORK/edited1"
    # The files are compiled into the binary: "editing" 0002 after it was
    # applied is the stored checksum no longer matching the file's.
    sql "UPDATE storage_consumer_migrations SET checksum = md5('an older 0002') WHERE name = '0002_reviews.sql'"
    local rc=0 err
    migrate_to "$WORK/edited2" || rc=$?
    assert_eq 1 "$rc" "exit status"
    err=$(cat "$WORK/edited2.err")
    assert_contains "$err" "0002_reviews.sql"
    assert_contains "$err" "edited"
    assert_eq "$(sql "SELECT md5('an older 0002')")" \
        "$(sql "SELECT checksum FROM storage_consumer_migrations WHERE name = '0002_reviews.sql'")" \
        "the refusal must not rewrite the stored checksum"
}

test_a_failing_migration_leaves_nothing_half_applied() {
    fresh_db mig_halfway
    create_applications_table
    # 0002 creates `reviews`: a table of that name already there makes it fail
    # after 0001 has run inside the same transaction.
    sql "CREATE TABLE reviews (something_else INTEGER)"
    local rc=0
    migrate_to "$WORK/halfway" || rc=$?
    assert_eq 1 "$rc" "exit status"
    assert_contains "$(cat "$WORK/halfway.err")" "0002_reviews.sql"
    assert_eq "reviews" "$(existing_own_tables)" "tables after the failed run (only the conflicting one)"
    assert_eq "something_else" "$(sql "SELECT string_agg(column_name, ',') FROM information_schema.columns WHERE table_name = 'reviews'")" \
        "the conflicting table is untouched"

    # Once the conflict is gone, the next run applies everything.
    sql "DROP TABLE reviews"
    migrate_ok "$WORK/halfway2"
    assert_eq "$MIGRATION_COUNT" "$(sql "SELECT count(*) FROM storage_consumer_migrations")" "rows after the retry"
}

test_password_never_appears_in_connection_errors() {
    local port rc out err conninfo
    port=$(free_port)
    for conninfo in \
        "host=127.0.0.1 port=$port dbname=storage user=storage password=s3cret connect_timeout=5" \
        "postgresql://storage:s3cret@127.0.0.1:$port/storage?connect_timeout=5" \
        "host=127.0.0.1 port=$port dbname=storage user=storage sslpassword=s3cret connect_timeout=5"; do
        rc=0
        DB=$conninfo migrate_to "$WORK/password" || rc=$?
        assert_eq 1 "$rc" "exit status for [$conninfo]"
        out=$(cat "$WORK/password.out" "$WORK/password.err")
        assert_contains "$out" "cannot connect to PostgreSQL" "the error is reported"
        case "$out" in
        *s3cret*) fail "the password appears in migrate's output: [$out]" ;;
        esac
    done
}

test_malformed_database_url_exits_2_without_echoing_the_password() {
    local rc=0 out
    DB='postgresql://u:s3cret@[::1' migrate_to "$WORK/malformed" || rc=$?
    assert_eq 2 "$rc" "exit status"
    out=$(cat "$WORK/malformed.out" "$WORK/malformed.err")
    assert_contains "$out" "STORAGE_DATABASE_URL"
    case "$out" in
    *s3cret*) fail "the password appears in migrate's output: [$out]" ;;
    esac
}

test_an_invalid_setting_exits_2_naming_the_variable_before_touching_the_database() {
    fresh_db mig_badsetting
    create_applications_table
    local rc=0
    migrate_to "$WORK/badsetting" STORAGE_LOG_LEVEL=loud || rc=$?
    assert_eq 2 "$rc" "exit status"
    assert_contains "$(cat "$WORK/badsetting.err")" "STORAGE_LOG_LEVEL"
    assert_eq "" "$(existing_own_tables)" "tables created despite an invalid setting"
}

# ---------------------------------------------------------------------------
# Least privilege (DESIGN.md: Least privilege): a migration role owns the
# schema, a runtime role has only the grants docs/OPERATIONS.md lists.

APP=com.example.leastprivilege

# The GRANT statements of docs/OPERATIONS.md's least-privilege section, for
# ROLE on database DBNAME.
manual_grants() { # role dbname
    sed -n '/^<!-- runtime-grants -->$/,/^```$/p' "$TOP/docs/OPERATIONS.md" | sed '1,2d;$d' |
        sed "s/storage_runtime/$1/g; s/DATABASE analytics/DATABASE $2/g"
}

# A database (fresh_db NAME) whose schema the role NAME_migrator applied,
# and a role NAME_runtime with docs/OPERATIONS.md's grants and nothing else:
# neither is a superuser, PostgreSQL 15 gives PUBLIC no CREATE on public, and
# PUBLIC's TEMPORARY on the database is revoked.
roles_db() { # name
    fresh_db "$1"
    create_applications_table
    sql "CREATE ROLE ${1}_migrator LOGIN; CREATE ROLE ${1}_runtime LOGIN;
         GRANT CREATE ON SCHEMA public TO ${1}_migrator;
         GRANT REFERENCES, SELECT ON apps_registry_application TO ${1}_migrator"
    local rc=0
    env STORAGE_DATABASE_URL="$DB user=${1}_migrator" timeout 60 "$BIN" migrate >"$WORK/$1.migrate" 2>&1 || rc=$?
    assert_eq 0 "$rc" "migrate as the migration role: $(cat "$WORK/$1.migrate")"
    sql "REVOKE TEMPORARY ON DATABASE $1 FROM PUBLIC"
    manual_grants "${1}_runtime" "$1" >"$WORK/$1.grants.sql"
    [ -s "$WORK/$1.grants.sql" ] || fail "docs/OPERATIONS.md has no runtime grants block"
    psql "$DB" -X -q -v ON_ERROR_STOP=1 -f "$WORK/$1.grants.sql" >/dev/null || fail "docs/OPERATIONS.md's grants failed"
    assert_eq "f" "$(sql "SELECT has_schema_privilege('${1}_runtime', 'public', 'CREATE')")" "the runtime role can create"
}

test_runtime_role_without_ddl_rights_stores_rows() {
    begin_test lp_rows
    roles_db lp_rows
    register_apps "$APP"
    { gen_reviews 1 20; echo '{"package_name":"'"$APP"'","review_id":"bad"}'; } | produce "$TOPIC_REVIEWS" -p 0
    echo '{"package_name":"'"$APP"'","crawled_at":"2026-11-29T12:00:00Z","title":"t","score":4.5}' | produce "$TOPIC_APP_STATS" -p 1
    start_service svc STORAGE_DATABASE_URL="$DB user=lp_rows_runtime"
    wait_for_sql "SELECT (SELECT count(*) FROM reviews) || '/' || (SELECT count(*) FROM app_stats) || '/' || (SELECT count(*) FROM dead_letter_events)" "20/1/1" 60
    wait_for_sql "SELECT count(*) > 0 FROM consumer_offsets" "t" 30
    stop_clean svc
    local log
    log=$(cat "$(svc_log svc)")
    case "$log" in *42501*|*"permission denied"*) fail "the runtime role lacked a privilege: $(grep -E '42501|permission denied' <<<"$log" | head -3)" ;; esac
    case "$log" in *"applied migration"*) fail "run applied a migration" ;; esac
    end_test
}

test_a_runtime_role_meets_a_schema_that_is_behind() {
    roles_db lp_behind
    # As if this binary were a release ahead of the database.
    sql "DROP TABLE consumer_offsets; DELETE FROM storage_consumer_migrations WHERE name = '0006_consumer_offsets.sql'"
    local out rc
    for how in "--no-migrate" "STORAGE_MIGRATE=off"; do
        rc=0
        if [ "$how" = --no-migrate ]; then
            out=$(env STORAGE_DATABASE_URL="$DB user=lp_behind_runtime" STORAGE_KAFKA_BOOTSTRAP_SERVERS="$BOOTSTRAP" \
                STORAGE_HEARTBEAT_DIR="$WORK/hb-behind" timeout 60 "$BIN" run --no-migrate 2>&1) || rc=$?
        else
            out=$(env STORAGE_DATABASE_URL="$DB user=lp_behind_runtime" STORAGE_KAFKA_BOOTSTRAP_SERVERS="$BOOTSTRAP" \
                STORAGE_HEARTBEAT_DIR="$WORK/hb-behind" "$how" timeout 60 "$BIN" run 2>&1) || rc=$?
        fi
        assert_eq 1 "$rc" "exit code with $how: $out"
        assert_contains "$out" "1 migration(s) missing (0006_consumer_offsets.sql)" "with $how"
        case "$out" in *42501*|*"permission denied"*) fail "run with $how attempted DDL: $out" ;; esac
    done
    # Left to migrate (the default), the runtime role tries and is refused:
    # still exit 1, the privilege named.
    rc=0
    out=$(env STORAGE_DATABASE_URL="$DB user=lp_behind_runtime" STORAGE_KAFKA_BOOTSTRAP_SERVERS="$BOOTSTRAP" \
        STORAGE_HEARTBEAT_DIR="$WORK/hb-behind" timeout 60 "$BIN" run 2>&1) || rc=$?
    assert_eq 1 "$rc" "exit code of run with STORAGE_MIGRATE=auto: $out"
    assert_contains "$out" "permission denied"
    assert_contains "$out" "0006_consumer_offsets.sql missing; a role without DDL rights"
    # --no-migrate belongs to run alone.
    rc=0
    out=$(env STORAGE_DATABASE_URL="$DB" "$BIN" migrate --no-migrate 2>&1) || rc=$?
    assert_eq 2 "$rc" "migrate --no-migrate: $out"
}

test_run_against_a_current_schema_takes_no_migration_lock() {
    fresh_db lp_lock
    create_applications_table
    migrate_ok "$WORK/lplock"
    # Another session holds the migration lock: a run that only reads the
    # schema must not wait for it.
    psql "$DB" -X -q -c "SELECT pg_advisory_lock(7301946530471288117); SELECT pg_sleep(60)" >/dev/null 2>&1 &
    local holder=$! out rc=0
    track "$holder"
    wait_for_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted" 1 "$STALL_S"
    out=$(env STORAGE_DATABASE_URL="$DB" STORAGE_KAFKA_BOOTSTRAP_SERVERS="$BOOTSTRAP" STORAGE_PIPELINES=reviews \
        STORAGE_TOPIC_REVIEWS=lp-lock-reviews STORAGE_GROUP_PREFIX=lp-lock STORAGE_SESSION_TIMEOUT_MS=6000 \
        STORAGE_HEARTBEAT_DIR="$WORK/hb-lplock" timeout --preserve-status -s INT 8 "$BIN" run 2>&1) || rc=$?
    # Still held all along: the run did not wait for it.
    assert_eq 1 "$(sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")" "the migration lock held"
    kill "$holder" 2>/dev/null || true
    wait "$holder" 2>/dev/null || true
    assert_eq 0 "$rc" "run stopped by SIGINT: $out"
    assert_contains "$out" "[reviews]"
}

run_tests
