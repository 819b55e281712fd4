#!/usr/bin/env bash
# A user's table keeps every promise the three built-in tables keep
# (DESIGN.md: Errors; The write path; Pipelines are declared): whatever
# rule of its own a table has — a foreign key, a deferred constraint, a
# second UNIQUE constraint, a trigger, a key too long for its index,
# row-level security, partitions — a row the table refuses is that row's
# dead letter with PostgreSQL's words, its neighbours are stored and the
# topic goes on; and a definition that can never work is refused at start,
# naming pipeline, field and column.
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APP=com.example.observer

# A pipeline of the user's own: observations keyed by (application, obs_id),
# the newest observation wins.
OBS_DEF='{"name": "observations", "batch_size": 100, "table": "observations",
      "application": {"member": "package_name", "column": "application_id"},
      "fields": [{"member": "obs_id", "required": true},
                 {"member": "ref"},
                 {"member": "note"},
                 {"member": "observed_at", "required": true}],
      "key": ["application_id", "obs_id"],
      "on_conflict": {"update": ["ref", "note", "observed_at"], "when_newer": "observed_at"}}'

# The observations table, with EXTRA (column or constraint definitions)
# added, and a table of references its `ref` may point to.
create_observations() { # [extra]
    sql "CREATE TABLE refs (id INT PRIMARY KEY);
         INSERT INTO refs VALUES (1), (2);
         CREATE TABLE observations (
           application_id BIGINT NOT NULL REFERENCES apps_registry_application (id),
           obs_id         TEXT NOT NULL,
           ref            INT,
           note           TEXT,
           observed_at    TIMESTAMPTZ NOT NULL,
           CONSTRAINT observations_key UNIQUE (application_id, obs_id)${1:+, $1})" >/dev/null
}

obs() { # obs_id ref note [observed_at]
    printf '{"package_name":"%s","obs_id":"%s","ref":%s,"note":"%s","observed_at":"%s"}\n' \
        "$APP" "$1" "$2" "$3" "${4:-2026-11-29T10:00:00Z}"
}

# N observations o-FROM.. with ref 1.
obs_range() { # from to
    local i
    for i in $(seq "$1" "$2"); do obs "o-$i" 1 "note $i"; done
}

# Start the observations pipeline as NAME (extra VAR=value settings after).
start_observations() { # name [VAR=value...]
    local name=$1
    shift
    definitions_with "$WORK/obs-$TEST_NAME.json" "${DEF:-$OBS_DEF}"
    start_service "$name" STORAGE_PIPELINES=observations "STORAGE_PIPELINES_FILE=$WORK/obs-$TEST_NAME.json" \
        "STORAGE_TOPIC_OBSERVATIONS=$OBS_TOPIC" "$@"
}

# A topic of the test's own for the observations.
obs_topic() {
    OBS_TOPIC=observations-$TEST_NAME
    broker_ctl topic-create "$OBS_TOPIC" 1 >/dev/null
}

dead_letters() {
    sql "SELECT error_type || '|' || error_detail FROM dead_letter_events ORDER BY kafka_offset"
}

stored_obs() {
    sql "SELECT string_agg(obs_id, ' ' ORDER BY obs_id) FROM observations"
}

# The pipeline went on: a later message is stored by the same process.
assert_topic_goes_on() { # name
    obs o-after 2 after | produce "$OBS_TOPIC" -p 0
    wait_for_sql "SELECT count(*) FROM observations WHERE obs_id = 'o-after'" 1
    assert_running "$1"
}

# Three observations, the middle one (MIDDLE, a JSON line) refused by the
# table: it is dead-lettered as database_rejected with SQLSTATE and DETAIL in
# PostgreSQL's words, its neighbours are stored, and the topic goes on.
assert_the_middle_row_is_refused() { # middle sqlstate [detail]
    { obs o1 1 a; echo "$1"; obs o3 2 c; } | produce "$OBS_TOPIC" -p 0
    start_observations svc
    wait_for_sql "SELECT count(*) FROM dead_letter_events" 1
    wait_for_sql "SELECT count(*) FROM observations" 2
    assert_eq "o1 o3" "$(stored_obs)" "the neighbours stored"
    assert_contains "$(dead_letters)" "database_rejected|the database refused the row: $2: "
    [ -z "${3:-}" ] || assert_contains "$(dead_letters)" "$3"
    assert_topic_goes_on svc
    stop_clean svc
}

# ---------------------------------------------------------------------------
# Errors by what they mean, not by their code alone.

test_a_row_whose_own_foreign_key_points_nowhere_is_dead_lettered_and_its_neighbours_stored() {
    begin_test fk
    register_apps "$APP"
    create_observations "CONSTRAINT observations_ref_fkey FOREIGN KEY (ref) REFERENCES refs (id)"
    obs_topic
    assert_the_middle_row_is_refused "$(obs o2 999 b)" 23503 observations_ref_fkey
    assert_eq 0 "$(grep -c 'registry changed' "$(svc_log svc)")" "the row's own key taken for a deleted application"
}

test_a_key_too_long_for_its_index_is_dead_lettered_and_its_neighbours_stored() {
    begin_test longkey
    register_apps "$APP"
    create_observations
    obs_topic
    local long
    # Random hex: incompressible enough that 4,000 characters pass the
    # 2,704 bytes a btree entry may hold.
    long=$(head -c 2000 /dev/urandom | od -An -tx1 | tr -d ' \n')
    assert_eq 4000 "${#long}" "the long key's length"
    assert_the_middle_row_is_refused "$(obs "$long" 1 b)" 54000 "index row size"
}

test_a_deferred_constraint_violated_is_found_at_its_row_and_dead_lettered() {
    begin_test deferred
    register_apps "$APP"
    create_observations "CONSTRAINT observations_ref_fkey FOREIGN KEY (ref) REFERENCES refs (id) DEFERRABLE INITIALLY DEFERRED"
    obs_topic
    assert_the_middle_row_is_refused "$(obs o2 999 b)" 23503 observations_ref_fkey
}

test_an_exception_a_users_trigger_raises_for_one_row_is_that_rows_dead_letter() {
    begin_test trigger
    register_apps "$APP"
    create_observations
    sql "CREATE FUNCTION no_forbidden() RETURNS trigger LANGUAGE plpgsql AS \$\$
         BEGIN
           IF NEW.note = 'forbidden' THEN RAISE EXCEPTION 'note % is forbidden here', NEW.note; END IF;
           RETURN NEW;
         END \$\$;
         CREATE TRIGGER observations_no_forbidden BEFORE INSERT OR UPDATE ON observations
           FOR EACH ROW EXECUTE FUNCTION no_forbidden()" >/dev/null
    obs_topic
    assert_the_middle_row_is_refused "$(obs o2 1 forbidden)" P0001 "note forbidden is forbidden here"
}

test_a_second_unique_constraint_beside_the_natural_key_violated_is_dead_lettered() {
    begin_test unique2
    register_apps "$APP"
    create_observations "CONSTRAINT observations_note_key UNIQUE (note)"
    obs_topic
    # A fresh backlog first, so that the clash meets a batch predicted new
    # (COPYed straight into the table) as well as the upsert.
    { obs_range 1 250; obs o-clash 1 "note 7"; obs_range 251 300; } | produce "$OBS_TOPIC" -p 0
    start_observations svc STORAGE_MAX_POLL_RECORDS_OBSERVATIONS=100 STORAGE_LOG_LEVEL=debug
    wait_committed "$(group_of observations)" "$OBS_TOPIC" 0 301
    assert_eq 300 "$(sql "SELECT count(*) FROM observations")" "rows stored"
    assert_eq 1 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_contains "$(dead_letters)" "database_rejected|the database refused the row: 23505: "
    assert_contains "$(dead_letters)" "observations_note_key"
    # The clash met both paths: the COPY of its batch, refused by the
    # second constraint, then the upsert that found its row.
    assert_eq 1 "$(log_count svc 'a batch predicted new was refused by the table: writing it by the upsert.*observations_note_key')" \
        "batches predicted new that the clash refused"
    [ "$(batch_sum svc observations inserted_by_copy)" -gt 0 ] || fail "no batch was COPYed: $(grep 'batch size' "$(svc_log svc)")"
    assert_topic_goes_on svc
    stop_clean svc
}

# ---------------------------------------------------------------------------
# The write path adapts to the table.

test_a_table_with_row_level_security_is_written_by_the_upsert_not_copied() {
    begin_test rls
    register_apps "$APP"
    create_observations
    # A runtime role that is not a superuser (a superuser bypasses every
    # policy) with what the service needs, and a policy for it.
    sql "CREATE ROLE rls_runtime LOGIN;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO rls_runtime;
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO rls_runtime;
         GRANT TEMPORARY ON DATABASE test_rls TO rls_runtime;
         ALTER TABLE observations ENABLE ROW LEVEL SECURITY;
         CREATE POLICY observations_runtime ON observations TO rls_runtime
           USING (true) WITH CHECK (note IS DISTINCT FROM 'hidden')" >/dev/null
    obs_topic
    # A fresh backlog (its batches would be COPYed), one row among them
    # that the policy's WITH CHECK refuses.
    { obs_range 1 150; obs o-hidden 1 hidden; obs_range 151 300; } | produce "$OBS_TOPIC" -p 0
    start_observations svc STORAGE_MAX_POLL_RECORDS_OBSERVATIONS=100 STORAGE_DATABASE_URL="$DB user=rls_runtime"
    wait_committed "$(group_of observations)" "$OBS_TOPIC" 0 301
    assert_eq 300 "$(sql "SELECT count(*) FROM observations")" "rows stored"
    assert_eq "300/0" "$(batch_sum svc observations inserted)/$(batch_sum svc observations inserted_by_copy)" \
        "inserted / of them COPYed into the table"
    assert_contains "$(dead_letters)" "database_rejected|the database refused the row: 42501: "
    assert_contains "$(dead_letters)" "row-level security"
    assert_topic_goes_on svc
    stop_clean svc
    assert_eq 0 "$(grep -c '0A000' "$(svc_log svc)")" "COPY refused under row-level security"

    # A privilege revoked while the service runs is no row's fault: the
    # pipeline fails (exit 1) rather than dead-letter every row.
    start_observations again STORAGE_DATABASE_URL="$DB user=rls_runtime"
    wait_for_log again "partitions assigned" 1 60
    sql "REVOKE INSERT ON observations FROM rls_runtime" >/dev/null
    obs o-revoked 1 r | produce "$OBS_TOPIC" -p 0
    assert_eq 1 "$(svc_wait again 60)" "exit after the privilege was revoked"
    assert_eq 1 "$(log_count again 'pipeline observations failed: .*42501')" "the pipeline failed for the privilege (42501)"
    assert_eq 1 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters after the privilege was revoked"
    assert_eq 0 "$(sql "SELECT count(*) FROM observations WHERE obs_id = 'o-revoked'")" "the record stored without the privilege"
    # Nothing lost: its offset was not committed, the next run reads it.
    assert_eq 302 "$(broker_committed "$(group_of observations)" "$OBS_TOPIC" 0)" "the committed offset, before the refused record"
}

# The shipped app_stats converted into a table partitioned by day.
partition_app_stats() {
    sql "ALTER TABLE app_stats RENAME TO app_stats_plain;
         CREATE TABLE app_stats (LIKE app_stats_plain INCLUDING DEFAULTS,
           PRIMARY KEY (id, crawled_at),
           CONSTRAINT app_stats_day_key UNIQUE (application_id, crawled_at),
           FOREIGN KEY (application_id) REFERENCES apps_registry_application (id))
           PARTITION BY RANGE (crawled_at);
         ALTER SEQUENCE app_stats_id_seq OWNED BY app_stats.id;
         DROP TABLE app_stats_plain;
         CREATE TABLE app_stats_20261128 PARTITION OF app_stats FOR VALUES FROM ('2026-11-28') TO ('2026-11-29');
         CREATE TABLE app_stats_20261129 PARTITION OF app_stats FOR VALUES FROM ('2026-11-29') TO ('2026-11-30')" >/dev/null
}

stat() { # package crawled_at title
    printf '{"package_name":"%s","crawled_at":"%s","title":"%s","score":4.5}\n' "$1" "$2" "$3"
}

# N apps' crawls of one hour, com.example.s-FROM..TO.
stats_of_hour() { # from to hour [day]
    local i
    for i in $(seq "$1" "$2"); do stat "com.example.s-$i" "2026-11-${4:-29}T$3:00:00Z" "app $i"; done
}

test_a_partitioned_table_is_written_through_every_path_and_a_row_without_partition_is_dead_lettered() {
    begin_test parts
    sql "INSERT INTO apps_registry_application (package_name, name)
         SELECT 'com.example.s-' || i, 'app ' || i FROM generate_series(1, 150) i" >/dev/null
    partition_app_stats
    # A fresh crawl of two hours (the second hour's batches are predicted
    # new, COPYed), one row of a day with no partition amid them; then the
    # same crawl again (a redelivery: probed) under a new group.
    { stats_of_hour 1 150 10; stats_of_hour 1 100 11; stat com.example.s-1 2026-12-01T10:00:00Z "no partition";
      stats_of_hour 101 150 11; stats_of_hour 1 150 09 28; } | produce "$TOPIC_APP_STATS" -p 0
    start_service svc STORAGE_PIPELINES=app-stats STORAGE_MAX_POLL_RECORDS_APP_STATS=50
    wait_committed "$(group_of app-stats)" "$TOPIC_APP_STATS" 0 451
    stop_clean svc
    assert_eq "450|150|300" "$(sql "SELECT count(*) || '|' || count(*) FILTER (WHERE crawled_at < '2026-11-29') || '|' ||
                                  (SELECT count(*) FROM app_stats_20261129) FROM app_stats")" "rows in all, in each partition"
    assert_eq "450/0" "$(batch_sum svc app-stats inserted)/$(batch_sum svc app-stats skipped)" "inserted/skipped"
    local copied
    copied=$(batch_sum svc app-stats inserted_by_copy)
    [ "$copied" -ge 100 ] || fail "only $copied rows COPYed into the partitioned table"
    assert_eq 1 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_contains "$(dead_letters)" "database_rejected|the database refused the row: 23514: "

    # The redelivery: every row found stored, nothing rewritten.
    local before
    before=$(sql "SELECT string_agg(xmin::text, ',' ORDER BY id) FROM app_stats")
    GROUP_PREFIX=$GROUP_PREFIX-again start_service again STORAGE_PIPELINES=app-stats STORAGE_MAX_POLL_RECORDS_APP_STATS=50
    wait_committed "$GROUP_PREFIX-again.app-stats" "$TOPIC_APP_STATS" 0 451
    stop_clean again
    assert_eq "0/450" "$(batch_sum again app-stats inserted)/$(batch_sum again app-stats skipped)" "inserted/skipped of the redelivery"
    [ "$(batch_sum again app-stats skipped_by_probe)" -gt 0 ] || fail "the redelivery never probed"
    assert_eq "$before" "$(sql "SELECT string_agg(xmin::text, ',' ORDER BY id) FROM app_stats")" "rows after the redelivery"
    assert_eq 1 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters after the redelivery"
}

# Every observation with its row version (xmin): rows not rewritten compare
# equal.
observations_and_versions() {
    sql "SELECT string_agg(xmin::text || ' ' || t::text, ' ' ORDER BY obs_id) FROM observations t"
}

# The probe (DESIGN.md: The write path) casts the batch's keys to the
# key's own type; a key the type refuses (a domain's CHECK, which only
# PostgreSQL judges) fails the probe, which costs that batch its shortcut
# and nothing else: the batch goes through the guarded upsert, which
# dead-letters that row with PostgreSQL's words and skips the stored rows,
# and the batches after it are probed again.
test_a_key_the_probe_refuses_costs_only_that_batch_its_shortcut() {
    begin_test probebad
    register_apps "$APP"
    sql "CREATE DOMAIN obs_code AS TEXT CHECK (VALUE LIKE 'o-%');
         CREATE TABLE observations (
           application_id BIGINT NOT NULL REFERENCES apps_registry_application (id),
           obs_id         obs_code NOT NULL,
           ref            INT,
           note           TEXT,
           observed_at    TIMESTAMPTZ NOT NULL,
           CONSTRAINT observations_key UNIQUE (application_id, obs_id))" >/dev/null
    local def=${OBS_DEF/\"batch_size\": 100/\"batch_size\": 50}
    obs_topic
    obs_range 1 300 | produce "$OBS_TOPIC" -p 0
    DEF=$def start_observations first
    wait_committed "$(group_of observations)" "$OBS_TOPIC" 0 300
    stop_clean first
    assert_eq 300 "$(sql "SELECT count(*) FROM observations")" "observations stored by the first run"
    local before
    before=$(observations_and_versions)

    # The same observations again under a new group, a key the domain
    # refuses amid them (record 176: in the fourth batch, after batches
    # that found every row stored).
    OBS_TOPIC=$OBS_TOPIC-again GROUP_PREFIX=$GROUP_PREFIX-again
    broker_ctl topic-create "$OBS_TOPIC" 1 >/dev/null
    { obs_range 1 175; obs bad 1 refused; obs_range 176 300; } | produce "$OBS_TOPIC" -p 0
    DEF=$def start_observations again
    wait_committed "$(group_of observations)" "$OBS_TOPIC" 0 301
    stop_clean again

    assert_contains "$(grep "the probe of stored rows failed" "$(svc_log again)")" "23514"
    assert_eq 1 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_contains "$(dead_letters)" "database_rejected|the database refused the row: 23514: "
    assert_eq "0/0/300" "$(batch_sum again observations inserted)/$(batch_sum again observations updated)/$(batch_sum again observations skipped)" \
        "inserted/updated/skipped"
    assert_eq "$before" "$(observations_and_versions)" "rows after the replay (and their row versions)"
    # The batch whose probe failed went through the upsert (as did the
    # first, with nothing found stored before it), and the next ones were
    # probed again: at most two batches of 50 were not found by a probe.
    local bad last probed
    bad=$(grep -E "batch size=.* dead_lettered=1 " "$(svc_log again)")
    assert_contains "$bad" " skipped_by_probe=0 "
    last=$(grep -E "info +\[observations\] batch size=" "$(svc_log again)" | tail -n 1)
    assert_contains "$last" " skipped_by_probe=$(echo "$last" | grep -oE 'size=[0-9]+' | cut -d= -f2) "
    probed=$(batch_sum again observations skipped_by_probe)
    [ "$probed" -ge 200 ] || fail "only $probed of 300 stored records found by the probe"
}

# The guarded upsert through a partitioned parent: inserted and updated
# counted without xmax, which a partitioned table cannot return.
test_a_partitioned_table_counts_updates_of_the_guarded_upsert() {
    begin_test partupd
    register_apps "$APP"
    sql "CREATE TABLE refs (id INT PRIMARY KEY);
         CREATE TABLE observations (
           application_id BIGINT NOT NULL REFERENCES apps_registry_application (id),
           obs_id TEXT NOT NULL, ref INT, note TEXT, observed_at TIMESTAMPTZ NOT NULL,
           CONSTRAINT observations_key UNIQUE (application_id, obs_id)) PARTITION BY HASH (obs_id);
         CREATE TABLE observations_0 PARTITION OF observations FOR VALUES WITH (MODULUS 2, REMAINDER 0);
         CREATE TABLE observations_1 PARTITION OF observations FOR VALUES WITH (MODULUS 2, REMAINDER 1)" >/dev/null
    obs_topic
    { obs_range 1 20; obs o-3 1 newer 2026-11-29T11:00:00Z; obs o-4 1 older 2026-11-29T09:00:00Z; } | produce "$OBS_TOPIC" -p 0
    start_observations svc STORAGE_MAX_POLL_RECORDS_OBSERVATIONS=10
    wait_committed "$(group_of observations)" "$OBS_TOPIC" 0 22
    stop_clean svc
    assert_eq "20/1/1" "$(batch_sum svc observations inserted)/$(batch_sum svc observations updated)/$(batch_sum svc observations skipped)" \
        "inserted/updated/skipped"
    assert_eq "newer|note 4" "$(sql "SELECT string_agg(note, '|' ORDER BY obs_id) FROM observations WHERE obs_id IN ('o-3', 'o-4')")" \
        "the newer observation won, the older was skipped"
}

# An optional field on a NOT NULL column with a DEFAULT (DESIGN.md: Pipelines
# are declared): where the member is absent or null the row takes the
# column's default — a constant, or an identity's next value — on every
# write path: the upsert, a batch predicted new (written by the upsert when
# one of its rows needs a default), the update of a stored row.
test_an_optional_field_on_a_not_null_column_with_a_default_takes_the_default() {
    begin_test defaults
    register_apps "$APP"
    # label's default is its domain's.
    sql "CREATE DOMAIN obs_label AS text DEFAULT 'untagged'" >/dev/null
    create_observations "status TEXT NOT NULL DEFAULT 'unreviewed', seq BIGINT GENERATED BY DEFAULT AS IDENTITY,
                         label obs_label NOT NULL"
    obs_topic
    local i
    # A fresh backlog: 300 with a status, a seq and a label, then 100 in
    # which every tenth lacks all three (null or absent), then o-1 again,
    # newer, without them.
    {
        for i in $(seq 1 300); do
            printf '{"package_name":"%s","obs_id":"o-%s","status":"seen","seq":%s,"label":"tagged","observed_at":"2026-11-29T10:00:00Z"}\n' "$APP" "$i" "$((i + 1000))"
        done
        for i in $(seq 301 400); do
            if [ $((i % 10)) = 0 ]; then
                printf '{"package_name":"%s","obs_id":"o-%s","status":null,"observed_at":"2026-11-29T10:00:00Z"}\n' "$APP" "$i"
            else
                printf '{"package_name":"%s","obs_id":"o-%s","status":"seen","seq":%s,"label":"tagged","observed_at":"2026-11-29T10:00:00Z"}\n' "$APP" "$i" "$((i + 1000))"
            fi
        done
        printf '{"package_name":"%s","obs_id":"o-1","observed_at":"2026-11-29T11:00:00Z"}\n' "$APP"
    } | produce "$OBS_TOPIC" -p 0
    DEF=${OBS_DEF/'{"member": "note"}'/'{"member": "note"}, {"member": "status"}, {"member": "seq"}, {"member": "label"}'}
    DEF=${DEF/'"update": ["ref", "note", "observed_at"]'/'"update": ["ref", "note", "observed_at", "status"]'} \
        start_observations svc STORAGE_MAX_POLL_RECORDS_OBSERVATIONS=100
    wait_committed "$(group_of observations)" "$OBS_TOPIC" 0 401
    stop_clean svc
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
    assert_eq "400|10|389" "$(sql "SELECT count(*) || '|' || count(*) FILTER (WHERE status = 'unreviewed' AND seq < 1000) || '|' ||
                                       count(*) FILTER (WHERE status = 'seen' AND seq = 1000 + substr(obs_id, 3)::int) FROM observations")" \
        "rows, rows with the defaults, rows with their own values (o-1 updated below)"
    assert_eq "unreviewed|1001" "$(sql "SELECT status || '|' || seq FROM observations WHERE obs_id = 'o-1'")" \
        "the update without a status set the default"
    assert_eq "10" "$(sql "SELECT count(*) FROM observations WHERE label = 'untagged'")" "rows with the domain's default"
    local copied
    copied=$(batch_sum svc observations inserted_by_copy)
    [ "$copied" -ge 100 ] || fail "only $copied rows COPYed: the COPY path never ran"
}

# The worked example of docs/OPERATIONS.md (Pipelines of your own), pasted
# as a user would: its migration, its definitions file and its message.
guide_block() { # lang n: the n-th ```lang block of the worked example
    awk -v lang="$1" -v n="$2" '
        /^### A worked example/ { on = 1; next }
        on && /^### / { exit }
        on && $0 ~ "^ *```" lang "$" { k++; if (k == n) { inside = 1; next } }
        inside && /^ *```$/ { exit }
        inside { sub(/^   /, ""); print }' "$TOP/docs/OPERATIONS.md"
}

test_the_worked_example_of_the_operations_guide_works_as_pasted() {
    begin_test guide
    # The file replaces the built-in definitions: their topics' settings
    # would be unknown settings.
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS
    register_apps com.example.app
    local table definitions message
    table=$(guide_block sql 1)
    definitions=$(guide_block json 1)
    message=$(awk '/^### A worked example/ { on = 1 } on && /A message it stores:/ { grab = 1 }
                   grab { line = line " " $0 } grab && /\)/ { exit }
                   END { sub(/.*A message it stores: `/, "", line); sub(/`.*/, "", line); print line }' "$TOP/docs/OPERATIONS.md")
    [ -n "$table" ] && [ -n "$definitions" ] || fail "no migration or definitions in the worked example"
    sql "$table" >/dev/null
    echo "$definitions" >"$WORK/guide.json"
    broker_ctl topic-create app-permissions-guide 3 >/dev/null
    echo "$message" | produce app-permissions-guide -p 0
    start_service svc STORAGE_PIPELINES=app-permissions "STORAGE_PIPELINES_FILE=$WORK/guide.json" \
        STORAGE_TOPIC_APP_PERMISSIONS=app-permissions-guide
    wait_committed "$(group_of app-permissions)" app-permissions-guide 0 1
    stop_clean svc
    assert_eq "CAMERA|dangerous|unreviewed" "$(sql "SELECT permission || '|' || protection_level || '|' || status FROM app_permissions")" \
        "the example's row"
    assert_eq 0 "$(sql "SELECT count(*) FROM dead_letter_events")" "dead letters"
}

# ---------------------------------------------------------------------------
# Start-up refuses what can never work.

# Start with DEF and expect exit 1 with MESSAGE in the log; verify says the same.
assert_refused_at_start() { # name message
    start_observations "$1"
    assert_eq 1 "$(svc_wait "$1" 60)" "exit of $1"
    assert_contains "$(cat "$(svc_log "$1")")" "$2"
    OP_ENV=("STORAGE_PIPELINES_FILE=$WORK/obs-$TEST_NAME.json" "STORAGE_TOPIC_OBSERVATIONS=$OBS_TOPIC" STORAGE_PIPELINES=observations)
    op "verify-$1" verify
    assert_eq 1 "$OP_RC" "verify's exit for $1"
    assert_contains "$(out "verify-$1")" "$2"
}

test_a_definition_that_can_never_work_is_refused_at_start() {
    begin_test never
    obs_topic
    # A field on a generated column.
    create_observations "shout TEXT GENERATED ALWAYS AS (upper(note)) STORED"
    DEF=${OBS_DEF/'{"member": "note"}'/'{"member": "note"}, {"member": "shout"}'} assert_refused_at_start generated \
        "pipeline observations, field shout, column observations.shout: a generated column cannot be written"
    sql "DROP TABLE observations, refs" >/dev/null

    # A field on an identity column that is GENERATED ALWAYS.
    create_observations "seq BIGINT GENERATED ALWAYS AS IDENTITY"
    DEF=${OBS_DEF/'{"member": "note"}'/'{"member": "note"}, {"member": "seq"}'} assert_refused_at_start identity \
        "pipeline observations, field seq, column observations.seq: an identity column GENERATED ALWAYS cannot be written"
    sql "DROP TABLE observations, refs" >/dev/null

    # The natural key's only UNIQUE constraint is DEFERRABLE.
    create_observations
    sql "ALTER TABLE observations DROP CONSTRAINT observations_key;
         ALTER TABLE observations ADD CONSTRAINT observations_key UNIQUE (application_id, obs_id) DEFERRABLE" >/dev/null
    assert_refused_at_start deferrable \
        "pipeline observations, column observations.obs_id: the natural key's UNIQUE constraint is DEFERRABLE (ON CONFLICT cannot use it"
    sql "DROP TABLE observations, refs" >/dev/null

    # The natural key's only unique index is INVALID (a failed CREATE INDEX CONCURRENTLY).
    create_observations
    sql "ALTER TABLE observations DROP CONSTRAINT observations_key;
         INSERT INTO apps_registry_application (id, package_name) VALUES (424242, 'com.example.dup');
         INSERT INTO observations VALUES (424242, 'd', NULL, NULL, now()), (424242, 'd', NULL, NULL, now())" >/dev/null
    sql "CREATE UNIQUE INDEX CONCURRENTLY observations_key ON observations (application_id, obs_id)" >/dev/null 2>&1 &&
        fail "the unique index was built over duplicates"
    assert_eq f "$(sql "SELECT indisvalid FROM pg_index WHERE indexrelid = 'observations_key'::regclass")" "the index is invalid"
    assert_refused_at_start invalid \
        "pipeline observations, column observations.obs_id: the natural key's unique index observations_key is INVALID"
    sql "DROP TABLE observations, refs" >/dev/null

    # A bound beyond the column's range.
    create_observations
    DEF=${OBS_DEF/'{"member": "ref"}'/'{"member": "ref", "min": 1e19}'} assert_refused_at_start bound \
        "pipeline observations, field ref, column observations.ref: min 1e+19 is beyond the range of integer"
    sql "DROP TABLE observations, refs" >/dev/null

    # A column the runtime role may not write.
    create_observations
    sql "CREATE ROLE never_runtime LOGIN;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO never_runtime;
         GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO never_runtime;
         GRANT TEMPORARY ON DATABASE test_never TO never_runtime;
         REVOKE UPDATE ON observations FROM never_runtime;
         GRANT UPDATE (ref, observed_at) ON observations TO never_runtime" >/dev/null
    local db=$DB
    DB="$db user=never_runtime" assert_refused_at_start privilege \
        "pipeline observations, field note, column observations.note: the role never_runtime may not UPDATE this column"
}

run_tests
