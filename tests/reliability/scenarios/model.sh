# The record-by-record rules of tombstones (DESIGN.md: Pipelines are
# declared; OPERATIONS.md: Tombstones) in a group in turmoil, held to
# fencing (DESIGN.md: Progress in the database, Fenced): version guards
# forgive a batch written late or twice, deletes and marks do not, so the
# tables tell whether every record was applied once, in its key's order.
#
# Three pipelines of a definitions file, each on a topic of 3 partitions
# holding a seeded random stream of tests/support/model.py (values of random
# record-timestamp versions with ties, values a CHECK refuses, tombstones,
# deletes a child's foreign key refuses, on few keys): tombstones that delete
# (batches of 2), that mark with the record's timestamp as the version
# (batches of 4), and with a member of the value as the version (batches of
# 6). Three processes share them, and the scenario goes through MODEL_EVENTS
# while they consume:
#   kill        kill -9 of a member with a batch in flight (its session
#               asleep in a trigger), restarted once it is evicted
#   gated_kill  the same, its batches first caught behind a gate (an
#               advisory lock their first INSERT waits on, through the
#               statement timeout) so that their transactions outlive it; the
#               gate opens once its successor has joined and the group has
#               stored past them, or at once when a new owner's batch waits
#               on a lock of theirs: a transaction whose COMMIT was sent with
#               it must then be fenced (SC001), or commit before the new
#               owner's batch, which is then fenced or, of the same records,
#               found stored
#   freeze      last: the same gate, the member frozen (SIGSTOP) past its
#               session timeout instead of killed; once the others have
#               stored past its batches at the gate (at full speed now), the
#               gate opens and it is resumed (at once, when a new owner waits
#               on a lock of its transactions): its batches are fenced (its
#               `batch fenced` lines, its metric), or found stored, or
#               stored, and it rejoins
#   stop, join  a member stopped with SIGTERM (exit 0), a new one started
# Every batch is slow: moving its positions sleeps its table's batch pace,
# which the scenario sets before each event so that the records left last
# until the churn is over, and each row written sleeps MODEL_ROW_MS; then
# both drop to 0 and the group drains the topics.
#
# It fails if a table differs from the model's by a single key (MODEL_SEED
# reproduces the streams; each run picks its own seed otherwise, named in
# the notes), a dead letter is not at a record the table refuses, a committed
# offset was ever ahead of the database's position, a position moved
# backwards, a position or committed offset ends short of its high
# watermark, the broker does not hold exactly the records the model produced,
# a member's storage_consumer_batches_fenced_total differs from its `batch
# fenced` lines, or an exit code is not the one expected. It reports the
# transactions PostgreSQL fenced (SC001 in its log, kept as postgres.log):
# the batches the members logged fenced, those they found stored by an
# earlier transaction of the same records, and those of killed members; and
# what became of each transaction left at the gate.

MODEL_SESSION_MS=3000
# name rule version batch
MODEL_PIPELINES=("model-delete delete record 2" "model-mark mark record 4" "model-mark-member mark member 6")
MODEL_RECORDS=3000
MODEL_KEYS=20
MODEL_APP=com.rel.app1
# freeze last: from it on, every batch goes at full speed.
MODEL_EVENTS=(kill gated_kill stop join gated_kill kill stop join freeze)
MODEL_ROW_MS=5
MODEL_GATE_LOCK=4243
MODEL_GATEKEEPER=rel-model-gatekeeper
# A member's lines for a batch fenced (rolled back, read again) and for one
# whose fence found its own positions already there (stored by an earlier
# transaction of the same records): DESIGN.md, Progress in the database.
MODEL_FENCED_LINE='batch fenced: its partitions moved on'
MODEL_FOUND_STORED_LINE="the batch's positions are where it would have moved them"

model_table() { echo "${1//-/_}"; }
model_topic() { echo "rel-$SC-$1"; }
model_names() { local p; for p in "${MODEL_PIPELINES[@]}"; do echo "${p%% *}"; done; }

model_definition() { # name rule version batch
    local tombstones ver='{"record": "timestamp", "column": "ver", "required": true}'
    [ "$3" = member ] && ver='{"member": "ver", "required": true}'
    case $2 in
    delete) tombstones='"tombstones": "delete", ' ;;
    mark) tombstones='"tombstones": {"mark": "deleted_at"}, ' ;;
    esac
    printf '{"name": "%s", "topic": "%s", "batch_size": %d, "table": "%s", "application": {"member": "package_name", "column": "application_id"}, "fields": [{"record": "key", "column": "k", "required": true}, {"member": "v", "required": true}, %s], "key": ["k"], %s"on_conflict": {"update": ["v", "ver"], "when_newer": "ver"}}' \
        "$1" "$(model_topic "$1")" "$4" "$(model_table "$1")" "$ver" "$tombstones"
}

# The tables, the streams (produced now, at once) and their models, the
# definitions file (the built-in pipelines, whose settings svc_env gives, and
# these), the paces, the gate, and every move of a position with the backend
# that made it (model_moves).
model_setup() { # seed
    local s=$1 spec name rule version batch table defs=""
    for spec in "${MODEL_PIPELINES[@]}"; do
        read -r name rule version batch <<<"$spec"
        table=$(model_table "$name")
        sql "CREATE TABLE $table (application_id BIGINT NOT NULL, k TEXT NOT NULL UNIQUE,
               v TEXT NOT NULL CHECK (v <> 'bad'), ver BIGINT NOT NULL, deleted_at TIMESTAMPTZ);
             CREATE TABLE ${table}_child (k TEXT NOT NULL REFERENCES $table (k))" >/dev/null
        broker_ctl topic-create "$(model_topic "$name")" 3 >/dev/null
        mkdir -p "$SW/model/$name"
        /usr/bin/python3 "$TOP/tests/support/model.py" stream --seed "$s" --mode "$rule" \
            $([ "$version" = member ] && echo --member-version) --topic "$(model_topic "$name")" \
            --bootstrap "$BOOTSTRAP" --app "$MODEL_APP" --table "$table" --out "$SW/model/$name" \
            --records "$MODEL_RECORDS" --keys "$MODEL_KEYS" --partitions 3 2>"$SW/model/$name/stream.err" ||
            fail_check "the model's stream of $name (seed $s) was not produced: $(tail -n 2 "$SW/model/$name/stream.err" | xargs)"
        psql "$DB" -X -q -v ON_ERROR_STOP=1 -f "$SW/model/$name/init.sql" >/dev/null || fail_check "$name: init.sql failed"
        echo "$s" >"$SW/model/$name/seed"
        defs="$defs,
    $(model_definition "$name" "$rule" "$version" "$batch")"
        s=$((s + 1))
    done
    { head -n -2 "$TOP/pipelines/default.json"; echo "$defs"; printf '  ]\n}\n'; } >"$SW/pipelines.json"
    sql "CREATE TABLE model_pace (tbl TEXT PRIMARY KEY, batch_ms INT NOT NULL, row_ms INT NOT NULL);
         CREATE TABLE model_gate (app TEXT PRIMARY KEY);
         CREATE TABLE model_moves (pid INT, backend_start TIMESTAMPTZ, app TEXT, group_id TEXT, topic TEXT, partition INT,
                                   old_next BIGINT, new_next BIGINT, at TIMESTAMPTZ DEFAULT clock_timestamp());
         -- Each row written sleeps its table's row pace. A session named in
         -- model_gate waits at its first INSERT on advisory lock
         -- $MODEL_GATE_LOCK, which the gatekeeper holds: through the
         -- statement timeout (caught, the lock waited for again), so that
         -- its transaction outlives its process, killed meanwhile. Only its
         -- termination, or the gatekeeper's, ends the wait.
         CREATE FUNCTION model_row() RETURNS trigger LANGUAGE plpgsql AS \$\$
         DECLARE d INT;
         BEGIN
             IF TG_OP = 'INSERT' AND EXISTS (SELECT 1 FROM model_gate WHERE app = current_setting('application_name')) THEN
                 LOOP
                     BEGIN
                         PERFORM pg_advisory_xact_lock_shared($MODEL_GATE_LOCK);
                         EXIT;
                     EXCEPTION WHEN query_canceled THEN
                         NULL;
                     END;
                 END LOOP;
             END IF;
             SELECT row_ms INTO d FROM model_pace WHERE tbl = TG_TABLE_NAME;
             IF d > 0 THEN PERFORM pg_sleep(d / 1000.0); END IF;
             IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
             RETURN NEW;
         END \$\$;
         -- A batch moving its positions sleeps its table's batch pace, once
         -- a transaction (an assignment, which moves the epoch, does not).
         CREATE FUNCTION model_batch() RETURNS trigger LANGUAGE plpgsql AS \$\$
         DECLARE d INT;
         BEGIN
             IF coalesce(current_setting('model.paced', true), '') <> 'y' THEN
                 PERFORM set_config('model.paced', 'y', true);
                 SELECT batch_ms INTO d FROM model_pace
                 WHERE tbl = replace(substr(NEW.group_id, length('$GROUP_PREFIX') + 2), '-', '_');
                 IF d > 0 THEN PERFORM pg_sleep(d / 1000.0); END IF;
             END IF;
             RETURN NEW;
         END \$\$;
         CREATE TRIGGER model_batch BEFORE UPDATE ON consumer_offsets FOR EACH ROW
             WHEN (NEW.epoch = OLD.epoch AND NEW.next_offset > OLD.next_offset) EXECUTE FUNCTION model_batch();
         CREATE FUNCTION model_move() RETURNS trigger LANGUAGE plpgsql AS \$\$
         BEGIN
             INSERT INTO model_moves (pid, backend_start, app, group_id, topic, partition, old_next, new_next)
             SELECT pg_backend_pid(), a.backend_start, a.application_name, NEW.group_id, NEW.topic, NEW.partition,
                    CASE TG_OP WHEN 'UPDATE' THEN OLD.next_offset END, NEW.next_offset
             FROM pg_stat_activity a WHERE a.pid = pg_backend_pid();
             RETURN NULL;
         END \$\$;
         CREATE TRIGGER model_move AFTER INSERT OR UPDATE ON consumer_offsets FOR EACH ROW EXECUTE FUNCTION model_move()" >/dev/null
    for name in $(model_names); do
        table=$(model_table "$name")
        sql "INSERT INTO model_pace VALUES ('$table', 0, 0);
             CREATE TRIGGER model_row BEFORE INSERT OR UPDATE OR DELETE ON $table FOR EACH ROW EXECUTE FUNCTION model_row()" >/dev/null
    done
}

# The broker holds every record the model produced: low watermark 0 and
# high watermark the count model.py produced, on every partition (the
# streams are far below the mock's 5 MiB a partition).
model_assert_broker_holds_the_streams() {
    local name p wm want
    for name in $(model_names); do
        assert_broker_kept_everything "$(model_topic "$name")"
        p=0
        while read -r want; do
            wm=$(watermarks "$(model_topic "$name")" "$p")
            [ "${wm#* }" = "$want" ] || fail_check "$(model_topic "$name") [$p]: high watermark ${wm#* }, but the model produced $want records"
            p=$((p + 1))
        done <"$SW/model/$name/counts"
    done
}

model_position() { # name partition: the database's position (0: none yet)
    sql "SELECT coalesce(max(next_offset), 0) FROM consumer_offsets
         WHERE group_id = '$GROUP_PREFIX.$1' AND topic = '$(model_topic "$1")' AND partition = $2"
}

# "NAME PARTITION POSITION HIGH_WATERMARK COMMITTED" a line: the database's
# position, the broker's high watermark and the group's committed offset
# (0: none), committed read first (an offset is committed only after its
# rows: read the other way round, a correct service could look wrong).
model_progress() {
    local name p c hi pos
    for name in $(model_names); do
        for p in 0 1 2; do
            c=$(broker_ctl committed "$GROUP_PREFIX.$name" "$(model_topic "$name")" "$p")
            c=${c#ok }
            [[ $c =~ ^-?[0-9]+$ ]] || c=?
            [ "$c" = -1001 ] && c=0
            pos=$(model_position "$name" "$p")
            hi=$(watermarks "$(model_topic "$name")" "$p")
            echo "$name $p $pos ${hi#* } $c"
        done
    done
}

# A checkpoint: no committed offset ahead of the database's position.
model_checkpoint() { # label
    local name p pos hi c all
    all=$(model_progress)
    while read -r name p pos hi c; do
        if [ "$c" = "?" ] || [ "$c" -gt "$pos" ]; then
            MODEL_AHEAD=$((MODEL_AHEAD + 1))
            fail_check "$1: $name [$p]: committed offset $c is ahead of the database's position $pos"
        fi
    done <<<"$all"
    trace "checkpoint ($1): $(echo "$all" | awk '{printf "%s[%s]=%s/%s ", substr($1, 7), $2, $3, $4}')"
}

# The batch pace, per table, set before each event so that the records left
# last until the churn is over: the rate since the last event is compared
# with the rate that spreads what is left over the events left and one more
# (at the mean time an event took so far), and the pace changes by that
# ratio, at most threefold at a time. It stays below a third of one database
# attempt (the statement timeout and 1 s: DESIGN.md, Settings and budgets).
# At first, about 14 records a second on each partition.
model_pace() { # events_done
    local done=$1 now spec name rule version batch table pos total cap ms
    now=$(now_ms)
    cap=$(((MODEL_STATEMENT_TIMEOUT_MS + 1000) / 3))
    for spec in "${MODEL_PIPELINES[@]}"; do
        read -r name rule version batch <<<"$spec"
        table=$(model_table "$name")
        read -r pos total < <(model_progress | awk -v n="$name" '$1 == n {p += $3; h += $4} END {print p + 0, h + 0}')
        ms=$(sql "SELECT batch_ms FROM model_pace WHERE tbl = '$table'")
        if [ "$done" = 0 ]; then
            ms=$((batch * 70))
        elif [ "$pos" -gt "${MODEL_LAST_POS[$name]}" ]; then
            ms=$(awk -v ms="$ms" -v cap="$cap" -v moved=$((pos - MODEL_LAST_POS[$name])) -v dt=$((now - MODEL_LAST_MS)) \
                -v left=$((total - pos)) -v per=$(((now - MODEL_CHURN_T0) / done)) -v events=$((${#MODEL_EVENTS[@]} - done)) '
                BEGIN {
                    rate = moved / dt; want = left / (per * (events + 1))
                    r = (want > 0 ? rate / want : 3); if (r > 3) r = 3; if (r < 1 / 3) r = 1 / 3
                    ms = int(ms * r + 0.5); if (ms < 1) ms = 1; if (ms > cap) ms = cap; print ms
                }')
        fi
        MODEL_LAST_POS[$name]=$pos
        sql "UPDATE model_pace SET batch_ms = $ms, row_ms = $MODEL_ROW_MS WHERE tbl = '$table'" >/dev/null
        MODEL_PACES[$name]="${MODEL_PACES[$name]:-}${MODEL_PACES[$name]:+ }$ms"
    done
    MODEL_LAST_MS=$now
    trace "batch pace (ms): $(for n in $(model_names); do printf '%s %s, ' "$n" "$(sql "SELECT batch_ms FROM model_pace WHERE tbl = '$(model_table "$n")'")"; done)$(model_progress | awk '{p += $3; h += $4} END {printf "%d of %d records stored", p, h}')"
}

model_start() { # name
    MODEL_PORT[$1]=$(free_port)
    svc_start "$1" "${MODEL_ENV[@]}" STORAGE_METRICS_ADDR="127.0.0.1:${MODEL_PORT[$1]}"
    MODEL_ALIVE+=("$1")
}

model_forget() { # name: no longer among the members
    local n rest=()
    for n in "${MODEL_ALIVE[@]}"; do [ "$n" = "$1" ] || rest+=("$n"); done
    MODEL_ALIVE=("${rest[@]}")
}

# Every pipeline's 3 partitions shared by the members alive, each owning at
# least one: a join, or a takeover, within a group's wait.
model_wait_owners() { # what
    local name r
    for name in $(model_names); do
        r=$(wait_owners "$MODEL_JOIN_S" "$name" "${MODEL_ALIVE[@]}") ||
            fail_check "$1: $(echo "${MODEL_ALIVE[@]}" | tr ' ' '+') did not share $name's partitions within $MODEL_JOIN_S s ($r)"
    done
}

# The member to kill or freeze: the one whose batch of the first pipeline
# (tombstones that delete: its values are inserted again after their
# deletes, so its batches reach the gate) moved a position last, as its
# partition still has records; the oldest member if none did.
model_victim() {
    local v
    v=$(sql "SELECT substr(app, 4) FROM model_moves
             WHERE group_id = '$GROUP_PREFIX.$(model_names | head -n 1)'
               AND app IN ($(printf "'sc-%s'," "${MODEL_ALIVE[@]}" | sed 's/,$//'))
             ORDER BY at DESC LIMIT 1")
    echo "${v:-${MODEL_ALIVE[0]}}"
}

# Wait (at most SECONDS) until SQL prints something; prints it.
model_wait_sql() { # seconds sql
    local end=$((SECONDS + $1)) out
    while [ "$SECONDS" -lt "$end" ]; do
        out=$(sql "$2" 2>/dev/null)
        [ -n "$out" ] && { echo "$out"; return 0; }
        sleep 0.05
    done
    return 1
}

# kill -9 of VICTIM while a batch of it sleeps in a trigger.
model_kill() { # victim
    local v=$1 rc left
    model_wait_sql "$STALL_S" "SELECT pid FROM pg_stat_activity WHERE application_name = 'sc-$v' AND wait_event = 'PgSleep'" >/dev/null ||
        fail_check "$v had no batch in flight within $STALL_S s"
    rc=$(svc_kill "$v")
    expect_eq "$v: exit code after kill -9 with a batch in flight" 137 "$rc"
    left=$(sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'sc-$v' AND state <> 'idle'")
    trace "$v killed with a batch in flight ($left of its sessions still in a statement)"
    MODEL_KILLS=$((MODEL_KILLS + 1))
}

# A killed VICTIM's successor, once it is evicted (lib.sh, await_eviction:
# no member joins beside a dead one), and the group settled.
model_restart() { # victim
    local v=$1
    model_forget "$v"
    await_eviction "$v" "$MODEL_SESSION_MS"
    model_start "${v%%[0-9]*}$(($(echo "$v" | tr -dc 0-9) + 1))"
    model_wait_owners "$v killed, restarted"
}

# The gate: the gatekeeper takes the advisory lock, VICTIM's sessions are
# named in model_gate, and its batches' first INSERT waits there. Once one
# waits, its other pipelines' batches may reach the gate too, as long as a
# third of the statement timeout: well before the attempt's deadline, at
# which the service would cancel and retry. MODEL_CAUGHT: "PID START" of
# each transaction at the gate; MODEL_CAUGHT_AT: "PIPELINE PARTITION
# POSITION" of each, the partition its backend moved last (with 3 members,
# a member owns one partition of each pipeline), where it stands now (read
# once VICTIM can no longer move it).
model_gate_close() { # victim
    local end
    PGAPPNAME=$MODEL_GATEKEEPER psql "$DB" -X -q -At -c "SELECT pg_advisory_lock($MODEL_GATE_LOCK), pg_sleep(3600)" >/dev/null 2>&1 &
    track $!
    model_wait_sql "$STALL_S" "SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                               WHERE a.application_name = '$MODEL_GATEKEEPER' AND l.locktype = 'advisory' AND l.granted" >/dev/null ||
        fail_check "the gatekeeper did not get its lock within $STALL_S s"
    sql "INSERT INTO model_gate VALUES ('sc-$1')" >/dev/null
    local waiting="SELECT a.pid || ' ' || a.backend_start FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                   WHERE a.application_name = 'sc-$1' AND l.locktype = 'advisory' AND l.objid = $MODEL_GATE_LOCK AND NOT l.granted"
    if model_wait_sql "$STALL_S" "$waiting" >/dev/null; then
        end=$(($(now_ms) + MODEL_STATEMENT_TIMEOUT_MS / 3))
        while [ "$(sql "$waiting" | wc -l)" -lt "${#MODEL_PIPELINES[@]}" ] && [ "$(now_ms)" -lt "$end" ]; do sleep 0.05; done
    else
        fail_check "no batch of $1 reached the gate within $STALL_S s"
    fi
    MODEL_CAUGHT=$(sql "$waiting")
    MODEL_GATED=$((MODEL_GATED + $(echo "$MODEL_CAUGHT" | grep -c .)))
}

# VICTIM killed or frozen: its batches at the gate stay there, the next
# ones pass; where the partitions of those at the gate stand; and the
# watcher (model_gate_watch) from now on.
model_gate_caught() { # victim how
    local pid start name p
    sql "DELETE FROM model_gate" >/dev/null
    MODEL_CAUGHT_AT=""
    while read -r pid start; do
        [ -n "$pid" ] || continue
        read -r name p < <(sql "SELECT substr(topic, length('rel-$SC-') + 1) || ' ' || partition FROM model_moves
                                WHERE pid = $pid AND backend_start = '$start' ORDER BY at DESC LIMIT 1")
        [ -n "$name" ] && MODEL_CAUGHT_AT="$MODEL_CAUGHT_AT$name $p $(model_position "$name" "$p")"$'\n'
    done <<<"$MODEL_CAUGHT"
    trace "$1 $2 with $(echo "$MODEL_CAUGHT" | grep -c .) transaction(s) at the gate: backends $(echo "$MODEL_CAUGHT" | cut -d' ' -f1 | xargs), at $(echo "$MODEL_CAUGHT_AT" | awk 'NF {printf "%s[%s]@%s ", $1, $2, $3}')"
    rm -f "$SW/gate.open" "$SW/gate.opened"
    model_gate_watch "$(echo "$MODEL_CAUGHT" | cut -d' ' -f1 | paste -sd,)" "$([ "$2" = frozen ] && echo "$1")" &
    track $!
}

# The one that opens the gate, in the background: at once when a batch of
# the service waits on a lock a transaction at the gate holds (a row it
# deleted, a dead letter or an applied tombstone it wrote), before that
# batch's statement timeout (a frozen VICTIM, whose transaction may wait
# for its next statement holding them, is resumed with it); otherwise when
# asked ($SW/gate.open). It writes $SW/gate.opened: why, PostgreSQL's log
# length and the time, when it opened.
model_gate_watch() { # pids [frozen victim]
    local why="" blocked
    while :; do
        blocked=$(sql "SELECT application_name FROM pg_stat_activity
                       WHERE pg_blocking_pids(pid) && ARRAY[${1:-0}]::int[] AND application_name LIKE 'sc-%' LIMIT 1" 2>/dev/null)
        if [ -n "$blocked" ]; then
            why="$blocked waits on a lock of a transaction at the gate"
            break
        fi
        [ -f "$SW/gate.open" ] && { why=asked; break; }
        sleep 0.1
    done
    local from opened
    from=$(wc -l <"$PG_DIR/server.log")
    opened=$(sql "SELECT clock_timestamp()")
    sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$MODEL_GATEKEEPER'" >/dev/null
    [ -n "$2" ] && svc_signal "$2" CONT
    printf '%s\t%s\t%s\n' "$why" "$from" "$opened" >"$SW/gate.opened.tmp"
    mv "$SW/gate.opened.tmp" "$SW/gate.opened"
}

# The gate opens once the batches at it are stored past by the partitions'
# new owners (their positions moved on), unless the watcher opened it first.
model_gate_open() {
    local end=$((SECONDS + STALL_S)) name p pos left why
    while [ "$SECONDS" -lt "$end" ] && [ ! -f "$SW/gate.opened" ]; do
        left=0
        while read -r name p pos; do
            [ -n "$name" ] || continue
            [ "$(model_position "$name" "$p")" -gt "$pos" ] || [ "$pos" = "$(watermarks "$(model_topic "$name")" "$p" | cut -d' ' -f2)" ] ||
                left=$((left + 1))
        done <<<"$MODEL_CAUGHT_AT"
        [ "$left" = 0 ] && break
        sleep 0.1
    done
    [ -f "$SW/gate.opened" ] || [ "$left" = 0 ] ||
        fail_check "the partitions of the transactions at the gate were neither stored past nor waited on within $STALL_S s of the group settling"
    touch "$SW/gate.open"
    wait_while_moving "$SW/gate.opened" "echo 0"
    if [ ! -f "$SW/gate.opened" ]; then
        fail_check "the gate's watcher did not open it within $STALL_S s"
        printf 'asked\t%s\t%s\n' "$(wc -l <"$PG_DIR/server.log")" "$(sql "SELECT clock_timestamp()")" >"$SW/gate.opened"
        sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$MODEL_GATEKEEPER'" >/dev/null
    fi
    IFS=$'\t' read -r why MODEL_LOG_FROM MODEL_OPENED <"$SW/gate.opened"
    if [ "$why" = asked ]; then
        trace "the gate opened: the partitions of the transactions at it were stored past"
    else
        trace "the gate opened: $why"
        MODEL_BLOCKED=$((MODEL_BLOCKED + 1))
    fi
}

# What became of each transaction that was at the gate, by the backend that
# ran it: fenced (its SC001 in PostgreSQL's log), committed (a position it
# moved once the gate opened, kept), or rolled back without either (it was
# not at its last statement, and its client never sent the rest).
model_gate_fates() { # victim
    local pid start fate fates=""
    while read -r pid start; do
        [ -n "$pid" ] || continue
        if [ "$(sql "SELECT count(*) FROM model_moves WHERE pid = $pid AND backend_start = '$start' AND at > '$MODEL_OPENED'")" != 0 ]; then
            fate=committed
            MODEL_LATE_COMMITS=$((MODEL_LATE_COMMITS + 1))
        elif tail -n +"$((MODEL_LOG_FROM + 1))" "$PG_DIR/server.log" | grep -q "\[$pid\] ERROR:  fenced"; then
            fate=fenced
            MODEL_ORPHANS_FENCED=$((MODEL_ORPHANS_FENCED + 1))
        else
            fate="rolled back"
            MODEL_ORPHANS_ROLLED_BACK=$((MODEL_ORPHANS_ROLLED_BACK + 1))
        fi
        fates="$fates $pid $fate;"
    done <<<"$MODEL_CAUGHT"
    trace "$1's transactions that were at the gate:${fates:- none}"
}

# kill -9 of VICTIM with its batches caught at the gate; its successor joins
# once it is evicted, each member of the group then owning one partition of
# each pipeline (none held up behind another partition's records); the gate
# opens, and the transactions left there end as they may.
model_gated_kill() { # victim
    local v=$1 rc
    model_gate_close "$v"
    rc=$(svc_kill "$v")
    expect_eq "$v: exit code after kill -9 with batches at the gate" 137 "$rc"
    MODEL_GATED_KILLS=$((MODEL_GATED_KILLS + 1))
    model_gate_caught "$v" killed
    model_restart "$v"
    model_gate_open
    model_wait_sql "$STALL_S" "SELECT CASE WHEN count(*) = 0 THEN 'gone' END FROM pg_stat_activity
                               WHERE application_name = 'sc-$v' AND state <> 'idle'" >/dev/null ||
        fail_check "$v's transactions did not end within $STALL_S s of the gate's opening"
    model_gate_fates "$v"
}

# VICTIM frozen (SIGSTOP) with its batches caught at the gate, past its
# session timeout: the others take its partitions over, the churn is over
# (every batch at full speed, so that the partitions it had are reached at
# once), the gate opens once they are stored past (or the watcher opened it
# and resumed VICTIM), and VICTIM is resumed: a zombie whose transactions
# were inside PostgreSQL. Each of its batches is fenced (its `batch fenced`
# line, its metric), or found stored by its own transaction that committed
# first, or stored; it rejoins the group.
model_gated_freeze() { # victim
    local v=$1 before found n
    # Its batches end, one way or another, as soon as it runs: the lines of
    # a batch fenced, found stored, stored, or retried.
    local ended="$MODEL_FENCED_LINE|$MODEL_FOUND_STORED_LINE|\\] batch size=|transient database error"
    model_gate_close "$v"
    svc_signal "$v" STOP
    before=$(stat -c %s "$SW/$v.log")
    n=$(log_count "$v" "$ended")
    model_gate_caught "$v" frozen
    model_forget "$v"
    # Evicted a session timeout after its last heartbeat, its partitions
    # taken over within a group's wait, unless a new owner's batch met a
    # lock of its transactions first (the watcher resumed it then).
    local end=$((SECONDS + MODEL_JOIN_S)) name owners
    while [ "$SECONDS" -lt "$end" ] && [ ! -f "$SW/gate.opened" ]; do
        owners=1
        for name in $(model_names); do
            [ "$(for n in "${MODEL_ALIVE[@]}"; do owned "$n" "$name"; done | awk '{t += $1; z += ($1 == 0)} END {print (t == 3 && z == 0)}')" = 1 ] ||
                owners=0
        done
        [ "$owners" = 1 ] && break
        sleep 0.2
    done
    [ -f "$SW/gate.opened" ] || [ "$owners" = 1 ] ||
        fail_check "$v frozen: $(echo "${MODEL_ALIVE[@]}" | tr ' ' '+') did not own every partition within $MODEL_JOIN_S s"
    sql "UPDATE model_pace SET batch_ms = 0, row_ms = 0" >/dev/null
    model_gate_open
    svc_signal "$v" CONT
    MODEL_ALIVE+=("$v")
    wait_log "$v" "$ended" $((n + 1)) "$STALL_S" || fail_check "$v logged nothing of its batches within $STALL_S s of being resumed"
    model_wait_owners "$v resumed"
    model_wait_sql "$STALL_S" "SELECT CASE WHEN count(*) = 0 THEN 'gone' END FROM pg_stat_activity a
                               WHERE a.pid IN ($(echo "$MODEL_CAUGHT" | cut -d' ' -f1 | paste -sd, | sed 's/^$/0/'))
                                 AND a.state NOT IN ('idle')" >/dev/null ||
        fail_check "$v's transactions at the gate did not end within $STALL_S s of its resumption"
    model_gate_fates "$v"
    found=$(tail -c +"$((before + 1))" "$SW/$v.log" | grep -cE "$MODEL_FENCED_LINE|$MODEL_FOUND_STORED_LINE")
    MODEL_FROZEN_FENCED=$(tail -c +"$((before + 1))" "$SW/$v.log" | grep -c "$MODEL_FENCED_LINE")
    trace "$v resumed: $MODEL_FROZEN_FENCED batch(es) fenced, $((found - MODEL_FROZEN_FENCED)) found stored"
}

# The table against the model, key by key: "MISSING BACK DIFFERENT" (keys
# the model has and the table lacks, keys the table holds that the model
# deleted, keys whose value, version or mark differ); the diff is
# $SW/model/NAME/diff.
model_compare() { # name
    local d=$SW/model/$1
    sql "SELECT k || '|' || v || '|' || ver || '|' ||
                coalesce((extract(epoch FROM deleted_at) * 1000)::bigint::text, '-') FROM $(model_table "$1") ORDER BY k" >"$d/got"
    diff "$d/expected" "$d/got" >"$d/diff"
    awk -F'|' 'NR == FNR {e[$1] = $0; next} {g[$1] = $0}
        END {
            for (k in e) if (!(k in g)) m++; else if (e[k] != g[k]) d++
            for (k in g) if (!(k in e)) b++
            print m + 0, b + 0, d + 0
        }' "$d/expected" "$d/got"
}

# Dead letters only where the table refuses a record: a value 'bad' (the
# CHECK), or a tombstone of the key a child row points at where tombstones
# delete; database_rejected. Prints "JUSTIFIED ALL".
model_dead_letters() {
    local spec name rule version batch
    : >"$SW/model/records.tsv"
    for spec in "${MODEL_PIPELINES[@]}"; do
        read -r name rule version batch <<<"$spec"
        kcat -C -b "$BOOTSTRAP" -t "$(model_topic "$name")" -o beginning -e -q -f "%t\t%p\t%o\t%k\t%S\t$rule\t%s\n" \
            >>"$SW/model/records.tsv" || fail_check "kcat could not consume $(model_topic "$name")"
    done
    psql "$DB" -X -q -At -v ON_ERROR_STOP=1 \
        -c "CREATE TEMP TABLE r (topic TEXT, partition INT, kafka_offset BIGINT, k TEXT, size INT, rule TEXT, value TEXT)" \
        -c "\\copy r FROM '$SW/model/records.tsv' WITH (FORMAT csv, DELIMITER E'\\t', QUOTE E'\\x01')" \
        -c "SELECT count(*) FILTER (WHERE d.error_type = 'database_rejected' AND (r.value LIKE '%\"v\": \"bad\"%'
                                     OR r.size = -1 AND r.rule = 'delete' AND EXISTS (
                                         SELECT 1 FROM model_delete_child c WHERE c.k = r.k))) || ' ' || count(*)
            FROM dead_letter_events d LEFT JOIN r USING (topic, partition, kafka_offset)"
}

scenario_model_churn() {
    scenario_begin model_churn
    local seed=${MODEL_SEED:-$((RANDOM * 32768 + RANDOM))}
    MODEL_STATEMENT_TIMEOUT_MS=$(svc_env x | sed -n 's/^STORAGE_DB_STATEMENT_TIMEOUT_MS=//p')
    MODEL_JOIN_S=$(group_wait_s "$MODEL_SESSION_MS")
    # Short sessions, as kill9: a killed member's successor waits a session
    # timeout for its eviction.
    MODEL_ENV=(STORAGE_PIPELINES="$(model_names | paste -sd,)" STORAGE_PIPELINES_FILE="$SW/pipelines.json"
        STORAGE_SESSION_TIMEOUT_MS=$MODEL_SESSION_MS STORAGE_RDKAFKA_HEARTBEAT_INTERVAL_MS=500)
    MODEL_ALIVE=()
    MODEL_KILLS=0 MODEL_GATED_KILLS=0 MODEL_GATED=0 MODEL_LATE_COMMITS=0 MODEL_ORPHANS_FENCED=0
    MODEL_ORPHANS_ROLLED_BACK=0 MODEL_BLOCKED=0 MODEL_AHEAD=0 MODEL_FROZEN_FENCED=0
    declare -gA MODEL_LAST_POS=() MODEL_PACES=() MODEL_PORT=()
    trace "model seeds from $seed (MODEL_SEED=$seed reproduces the streams)"
    model_setup "$seed"
    model_assert_broker_holds_the_streams
    model_pace 0
    model_start A
    model_start B
    model_start C
    model_wait_owners "A, B and C started"
    local event i=0 v rc n joins=0 stops=0 frozen=0 next=D
    MODEL_CHURN_T0=$(now_ms)
    MODEL_LAST_MS=$MODEL_CHURN_T0
    for event in "${MODEL_EVENTS[@]}"; do
        [ "$i" -gt 0 ] && model_pace "$i"
        i=$((i + 1))
        v=${MODEL_ALIVE[0]}
        [ "$event" = stop ] || v=$(model_victim)
        case $event in
        kill)
            model_kill "$v"
            model_restart "$v"
            ;;
        gated_kill) model_gated_kill "$v" ;;
        freeze)
            model_gated_freeze "$v"
            frozen=$((frozen + 1))
            ;;
        stop)
            rc=$(svc_stop "$v")
            expect_eq "exit code of $v after SIGTERM mid-batch" 0 "$rc"
            model_forget "$v"
            model_wait_owners "$v stopped"
            stops=$((stops + 1))
            ;;
        join)
            v=$next
            next=$(echo "$next" | tr 'A-Y' 'B-Z')
            model_start "$v"
            model_wait_owners "$v joined"
            joins=$((joins + 1))
            ;;
        esac
        for n in "${MODEL_ALIVE[@]}"; do expect_alive "$n"; done
        model_checkpoint "after event $i ($event of $v)"
    done
    # The churn is over: every batch at full speed, until each position and
    # committed offset is at its high watermark (as long as they move).
    sql "UPDATE model_pace SET batch_ms = 0, row_ms = 0" >/dev/null
    local left last=-1 t=$SECONDS
    while :; do
        left=$(model_progress | awk '{l += ($4 - $3) + ($4 - ($5 == "?" ? 0 : $5))} END {print l + 0}')
        [ "$left" = 0 ] && break
        [ "$left" != "$last" ] && { last=$left; t=$SECONDS; progress; }
        [ $((SECONDS - t)) -ge "$STALL_S" ] && { fail_check "positions and committed offsets stay $left records short of the high watermarks: none moved for $STALL_S s"; break; }
        sleep 0.5
    done
    model_checkpoint "end"
    model_assert_broker_holds_the_streams
    # The members alive: their fenced batches by their metric and their log.
    local metric
    for n in "${MODEL_ALIVE[@]}"; do
        metric=$(http_get "${MODEL_PORT[$n]}" /metrics | tr -d '\r' | awk '/^storage_consumer_batches_fenced_total\{/ {s += $2} END {print s + 0}')
        expect_eq "$n: storage_consumer_batches_fenced_total against its 'batch fenced' lines" "$(log_count "$n" "$MODEL_FENCED_LINE")" "$metric"
    done
    for n in "${MODEL_ALIVE[@]}"; do
        rc=$(svc_stop "$n")
        expect_eq "exit code of $n after SIGTERM" 0 "$rc"
    done
    model_wait_sql "$STALL_S" "SELECT CASE WHEN count(*) = 0 THEN 'none' END FROM pg_stat_activity
                               WHERE application_name LIKE 'sc-%' AND state <> 'idle'" >/dev/null ||
        fail_check "sessions of the service still in a statement after every member stopped"
    expect_positions_never_backwards
    # The tables against the model.
    local name missing=0 back=0 differ=0 m b d rows_exp=0 rows=0 detail=""
    for name in $(model_names); do
        read -r m b d < <(model_compare "$name")
        missing=$((missing + m))
        back=$((back + b))
        differ=$((differ + d))
        rows_exp=$((rows_exp + $(wc -l <"$SW/model/$name/expected")))
        rows=$((rows + $(wc -l <"$SW/model/$name/got")))
        [ $((m + b + d)) -gt 0 ] &&
            detail="$detail${detail:+; }$name (seed $(cat "$SW/model/$name/seed")): $m missing, $b back after their delete, $d different (< model, > table: $(grep '^[<>]' "$SW/model/$name/diff" | head -n 4 | paste -sd' '))"
        trace "$name: $m missing, $b back, $d different of $(wc -l <"$SW/model/$name/expected") keys"
    done
    [ -n "$detail" ] && fail_check "tables that differ from the records applied one by one: $detail"
    local dl_ok dl_all
    read -r dl_ok dl_all < <(model_dead_letters)
    [ -n "$dl_all" ] || { fail_check "the dead letters could not be judged"; dl_ok=0 dl_all=0; }
    [ "$dl_ok" = "$dl_all" ] || fail_check "$((dl_all - dl_ok)) dead letter(s) of $dl_all at records the tables do not refuse"
    cp "$PG_DIR/server.log" "$SW/postgres.log"
    local logged=0 found_stored=0 pg_fenced published unconsumed
    for n in $(cat "$SW/services"); do
        logged=$((logged + $(log_count "$n" "$MODEL_FENCED_LINE")))
        found_stored=$((found_stored + $(log_count "$n" "$MODEL_FOUND_STORED_LINE")))
    done
    pg_fenced=$(grep -c 'ERROR:  fenced' "$SW/postgres.log")
    published=$(model_progress | awk '{n += $4} END {print n + 0}')
    unconsumed=$(model_progress | awk '{n += $4 - ($5 == "?" ? 0 : $5)} END {print n + 0}')
    # The table's columns: lost = keys missing; wrong = keys back or
    # different, and dead letters where nothing is refused.
    echo "$published|$rows_exp|$rows|$missing|0|$((back + differ + dl_all - dl_ok))|$dl_ok|$dl_all|$MODEL_AHEAD|$unconsumed|0|${detail//|//}" >"$SW/check"
    note "seed $seed; $((MODEL_KILLS + MODEL_GATED_KILLS)) kill -9 ($MODEL_KILLS mid-batch, $MODEL_GATED_KILLS at the gate), each restarted once evicted; $stops stops, $joins joins, $frozen frozen at the gate and resumed ($MODEL_FROZEN_FENCED of its batches fenced): $((2 * (MODEL_KILLS + MODEL_GATED_KILLS + frozen) + stops + joins)) rebalances; $pg_fenced transactions fenced (SC001): $logged batches the members logged fenced, $found_stored they found stored by an earlier transaction of the same records, $((pg_fenced - logged - found_stored)) of killed members; $MODEL_GATED transaction(s) left at the gate: $MODEL_ORPHANS_FENCED fenced, $MODEL_LATE_COMMITS committed first, $MODEL_ORPHANS_ROLLED_BACK rolled back (the gate opened early $MODEL_BLOCKED time(s), a new owner waiting on a lock of one); $((missing + back + differ)) differing keys of $rows_exp; batch paces (ms) $(for n in $(model_names); do printf '%s %s; ' "${n#model-}" "${MODEL_PACES[$n]}"; done | sed 's/; $//')"
}
