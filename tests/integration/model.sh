#!/usr/bin/env bash
# One semantics, record by record (docs/DESIGN.md: Pipelines are declared,
# tombstones): for seeded random streams of values (random versions, ties
# common), tombstones, values a CHECK refuses and deletes a child's foreign
# key refuses, on few keys, the table after the service equals the records
# applied one by one in offset order by the documented rules
# (tests/support/model.py), key by key, whatever the batch boundaries, the
# isolation after a refusal and the probe. Both tombstone rules (delete, and
# mark with a version the mark's guard compares or one it cannot) and the
# upsert-only rule, each in batches of 1, 7, 60 and 200, one pipeline each in
# one service. MODEL_SEED sets the first seed (each run picks its own
# otherwise; a failure names it).
. "$(dirname "$0")/lib.sh"

pg_start
broker_start

APP=com.example.model
MODEL=$TOP/tests/support/model.py

# The pipelines' definitions, one per rule and batch size, into $1; their
# names one per line on stdout, "NAME RULE VERSION BATCH".
model_pipelines() {
    local rule version batch
    for rule in delete mark upsert; do
        for version in record member; do
            [ "$rule" = mark ] || [ "$version" = record ] || continue
            for batch in 1 7 60 200; do echo "m-$rule-$version-$batch $rule $version $batch"; done
        done
    done
}

model_definition() { # name rule version batch
    local tombstones="" ver='{"record": "timestamp", "column": "ver", "required": true}'
    [ "$3" = member ] && ver='{"member": "ver", "required": true}'
    case $2 in
        delete) tombstones='"tombstones": "delete", ' ;;
        mark) tombstones='"tombstones": {"mark": "deleted_at"}, ' ;;
    esac
    printf '{"name": "%s", "topic": "%s", "batch_size": %d, "table": "%s",
      "application": {"member": "package_name", "column": "application_id"},
      "fields": [{"record": "key", "column": "k", "required": true}, {"member": "v", "required": true}, %s],
      "key": ["k"], %s"on_conflict": {"update": ["v", "ver"], "when_newer": "ver"}}' \
        "$1" "$1-$TEST_NAME" "$4" "$(echo "$1" | tr - _)" "$ver" "$tombstones"
}

# Wait until pipeline NAME has committed COUNT records of partition P of its
# topic, while the service runs: every record may be a batch of its own, so
# the bound grows with the records, a batch time each, not with how long a
# batch usually takes.
wait_model_consumed() { # name partition count
    local got end=$((SECONDS + 60 + $3 / 4))
    while [ "$SECONDS" -lt "$end" ]; do
        got=$(broker_committed "$(group_of "$1")" "$1-$TEST_NAME" "$2")
        [ "$got" = "$3" ] && return 0
        assert_running svc
        sleep 0.25
    done
    fail "$1: committed [$got] of the $3 records of partition $2"
}

# Runs every pipeline of model_pipelines over its own seeded stream of
# RECORDS records on KEYS keys, in one service, and compares each table with
# the model's. SEED: the first pipeline's seed (the next ones follow it).
run_models() { # seed records keys
    local seed=$1 records=$2 keys=$3 name rule version batch table defs="" names="" s=$1 p count failed=""
    register_apps "$APP"
    while read -r name rule version batch; do
        table=$(echo "$name" | tr - _)
        sql "CREATE TABLE $table (application_id BIGINT NOT NULL, k TEXT NOT NULL UNIQUE,
               v TEXT NOT NULL CHECK (v <> 'bad'), ver BIGINT NOT NULL, deleted_at TIMESTAMPTZ);
             CREATE TABLE ${table}_child (k TEXT NOT NULL REFERENCES $table (k))" >/dev/null
        broker_ctl topic-create "$name-$TEST_NAME" 2 >/dev/null
        mkdir -p "$WORK/model-$TEST_NAME/$name"
        /usr/bin/python3 "$MODEL" stream --seed "$s" --mode "$rule" $([ "$version" = member ] && echo --member-version) \
            --topic "$name-$TEST_NAME" --bootstrap "$BOOTSTRAP" --app "$APP" --table "$table" \
            --records "$records" --keys "$keys" --out "$WORK/model-$TEST_NAME/$name" ||
            fail "the model's stream for $name (seed $s) was not produced"
        sql "$(cat "$WORK/model-$TEST_NAME/$name/init.sql")" >/dev/null
        defs="$defs${defs:+,
    }$(model_definition "$name" "$rule" "$version" "$batch")"
        names="$names${names:+,}$name"
        s=$((s + 1))
    done < <(model_pipelines)
    # Sixteen of its own, the most one file holds: none of the built-in.
    printf '{\n  "pipelines": [\n    %s\n  ]\n}\n' "$defs" >"$WORK/model-$TEST_NAME.json"
    unset TOPIC_APP_STATS TOPIC_REVIEWS TOPIC_NETWORK_METRICS
    start_service svc "STORAGE_PIPELINES=$names" "STORAGE_PIPELINES_FILE=$WORK/model-$TEST_NAME.json"
    while read -r name rule version batch; do
        p=0
        while read -r count; do
            wait_model_consumed "$name" "$p" "$count"
            p=$((p + 1))
        done <"$WORK/model-$TEST_NAME/$name/counts"
    done < <(model_pipelines)
    stop_clean svc
    s=$seed
    while read -r name rule version batch; do
        table=$(echo "$name" | tr - _)
        sql "SELECT k || '|' || v || '|' || ver || '|' ||
                    coalesce((extract(epoch FROM deleted_at) * 1000)::bigint::text, '-') FROM $table ORDER BY k" \
            >"$WORK/model-$TEST_NAME/$name/got"
        if ! diff "$WORK/model-$TEST_NAME/$name/expected" "$WORK/model-$TEST_NAME/$name/got" >"$WORK/model-$TEST_NAME/$name/diff"; then
            failed="$failed
$name (seed $s, rule $rule, version from the $version, batches of $batch): $(grep -c '^[<>]' "$WORK/model-$TEST_NAME/$name/diff") differing lines (< model, > table):
$(head -n 12 "$WORK/model-$TEST_NAME/$name/diff")"
        fi
        s=$((s + 1))
    done < <(model_pipelines)
    [ -z "$failed" ] || fail "tables that differ from the records applied one by one:$failed"
    no_sanitizer_report "$(svc_log svc)"
}

test_every_batch_boundary_leaves_the_table_the_records_give_one_by_one() {
    begin_test model
    local seed=${MODEL_SEED:-$((RANDOM * 32768 + RANDOM))}
    echo "# model seeds from $seed (MODEL_SEED=$seed reproduces them)"
    run_models "$seed" 300 6
}

run_tests
