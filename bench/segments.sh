#!/usr/bin/env bash
# Counting segments (issue #46): GET /api/admin/segments/{name}/count over N users (default
# 1,000,000), on SQLite + files and on PostgreSQL (a local cluster this script starts, durable
# commits as bench/lib.sh's start_postgres makes it), one engine after the other. Targets: a
# count answered in at most 5 s on SQLite and 2 s on PostgreSQL.
#
# Per engine:
# 1. The schema: `richpush users add admin --admin` migrates the store as it adds the admin.
# 2. N users inserted straight into the store's tables in one transaction (a recursive CTE in
#    the sqlite3 CLI, generate_series in psql; registering a million through the API would take
#    hours), as the API would have left them:
#    - attributes in the stored form (JSON, keys sorted; NULL for none): plan gold / silver /
#      free, age 13-90, beta true / false, each missing for ~10% of users;
#    - 0 to 3 topics of 10 (1.5 on average: each topic ~15% of users), rows of `topics`;
#    - 0 to 3 devices (1.2 on average: 10% none, 65% one, 20% two, 5% three), rows of
#      `registrations` as PUT /api/register leaves them: platform apns, fcm or web, a push
#      handle, app `default`, the `username:` tag, an app version (1 in 11 none, 1 in 11 `beta`,
#      which has no key) with its AppVersionKey, lastSeen on the hour within the last 60 days;
#    then ANALYZE on SQLite (SQLITE_ANALYZE=0 leaves it out: serve itself never runs it, so a
#    store in use has no statistics unless its operator ran it) and VACUUM ANALYZE on PostgreSQL
#    (what autovacuum does to long-registered users' tables).
# 3. `serve` on that store; three segments saved through the API (PUT /api/admin/segments/NAME,
#    admin Basic credentials, the admin's bcrypt checked once before anything is timed):
#      gold-apns             {"all":[plan eq "gold", platform apns]}
#      sports-or-minor       {"any":[topic sports, age lt 18]}
#      recent-2.10-not-beta  {"all":[appVersion gte 2.10, lastSeen withinDays 30, not beta eq true]}
#    each counted ROUNDS times (default 3) with curl (time_total), in turns; the median.
# 4. The two queries SegmentStore.count runs for each (its users, then their devices), with the
#    condition SegmentCondition compiles written out by hand below (keep them in sync: their
#    counts must be the API's, which the table's "sql" column checks), run once in the engine's
#    own CLI, timed, and their plans: EXPLAIN QUERY PLAN on SQLite, EXPLAIN (ANALYZE, BUFFERS) on
#    PostgreSQL, in a REPEATABLE READ READ ONLY transaction as serve's reads are.
# 5. A table: engine, segment, users, devices, median seconds and each round's, the CLI's
#    seconds for the two queries, the target. Exits nonzero when a segment counts no users (the
#    data did not load) or a count fails.
#
# Progress goes to stderr; the plans and the table to stdout.
#
# Usage: bench/segments.sh [N] [ENGINES]   (default 1000000 "sqlite postgres"; env ROUNDS,
#        SQLITE_ANALYZE=0, PG_OPTIONS (say "-c work_mem=64MB -c jit=off"), BENCH_WORK, KEEP_WORK=1)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000000}
engines=${2:-sqlite postgres}
rounds=${ROUNDS:-3}
work=$(realpath -m "${BENCH_WORK:-bench/work}")/segments
port=18598
pgport=25436
password=admin-password
[ "$rounds" -ge 1 ] || { echo "ROUNDS must be 1 or more" >&2; exit 2; }
for engine in $engines; do
    case $engine in sqlite | postgres) ;; *) echo "unknown engine $engine (sqlite, postgres)" >&2; exit 2 ;; esac
done
source bench/lib.sh
install_missing sqlite3:sqlite3 bc:bc
swift build -c release --product richpush >&2
rp="$(swift build -c release --show-bin-path)/richpush"
rm -rf "$work" && mkdir -p "$work" && cd "$work"

use_engines  # bench/lib.sh: PostgreSQL's tools when $engines names it, and the cleanup on exit

sqlite_file="$work/data-sqlite/richpush.sqlite"
postgres_url="postgres://richpush@127.0.0.1:$pgport/richpush"
database_of() { [ "$1" = sqlite ] && echo "sqlite:$sqlite_file" || echo "$postgres_url"; }
psql_() { "$pg/psql" -X -q -v ON_ERROR_STOP=1 -P pager=off -h 127.0.0.1 -p "$pgport" -U richpush -d richpush "$@"; }

segments=(gold-apns sports-or-minor recent-2.10-not-beta)
declare -A filters=(
    [gold-apns]='{"all":[{"attribute":"plan","op":"eq","value":"gold"},{"platform":"apns"}]}'
    [sports-or-minor]='{"any":[{"topic":"sports"},{"attribute":"age","op":"lt","value":18}]}'
    [recent-2.10-not-beta]='{"all":[{"appVersion":{"op":"gte","value":"2.10"}},{"lastSeen":{"withinDays":30}},{"not":{"attribute":"beta","op":"eq","value":true}}]}'
)
declare -A targets=([sqlite]=5 [postgres]=2)

# condition ENGINE SEGMENT SINCE: the condition over `users u` that SegmentCondition.swift
# compiles the segment's filter to on ENGINE, its arguments written in place (SINCE: the
# lastSeen bound, now - 30 days). Written by hand, in sync with SegmentCondition.swift as of
# this script's commit: all/any are "(a AND b)"/"(a OR b)", not is "(NOT a)"; a string eq is a
# CASE on the attribute's JSON type; a number is bound as a double (18.0); a boolean eq is
# COALESCE(type = 'true', 0) on SQLite and COALESCE(type = 'boolean' AND text = 'true', FALSE) on
# PostgreSQL, where every attribute read is of u.attributes_json (jsonb, generated) and the key is
# CAST(? AS TEXT); topics and devices are EXISTS on topics st / registrations sd by username, a
# device needing a handle; appVersion compares AppVersionKey.ofFilterValue("2.10"). When the
# compiler changes, change these: the "sql" column of the table says when they disagree.
condition() {
    case "$1/$2" in
    sqlite/gold-apns) cat <<'SQL' ;;
(CASE WHEN json_type(u.attributes, '$."plan"') = 'text' THEN json_extract(u.attributes, '$."plan"') = 'gold' ELSE 0 END AND EXISTS (SELECT 1 FROM registrations sd WHERE sd.username = u.name AND sd.handle IS NOT NULL AND sd.platform = 'apns'))
SQL
    sqlite/sports-or-minor) cat <<'SQL' ;;
(EXISTS (SELECT 1 FROM topics st WHERE st.username = u.name AND st.topic = 'sports') OR CASE WHEN json_type(u.attributes, '$."age"') IN ('integer', 'real') THEN json_extract(u.attributes, '$."age"') < 18.0 ELSE 0 END)
SQL
    sqlite/recent-2.10-not-beta) sed "s/@SINCE@/$3/" <<'SQL' ;;
(EXISTS (SELECT 1 FROM registrations sd WHERE sd.username = u.name AND sd.handle IS NOT NULL AND sd.appVersionKey <> '' AND sd.appVersionKey >= '000000002.000000010') AND EXISTS (SELECT 1 FROM registrations sd WHERE sd.username = u.name AND sd.handle IS NOT NULL AND sd.lastSeen >= @SINCE@) AND (NOT COALESCE(json_type(u.attributes, '$."beta"') = 'true', 0)))
SQL
    postgres/gold-apns) cat <<'SQL' ;;
(CASE WHEN jsonb_typeof(u.attributes_json -> CAST('plan' AS TEXT)) = 'string' THEN (u.attributes_json ->> CAST('plan' AS TEXT)) = 'gold' ELSE FALSE END AND EXISTS (SELECT 1 FROM registrations sd WHERE sd.username = u.name AND sd.handle IS NOT NULL AND sd.platform = 'apns'))
SQL
    postgres/sports-or-minor) cat <<'SQL' ;;
(EXISTS (SELECT 1 FROM topics st WHERE st.username = u.name AND st.topic = 'sports') OR CASE WHEN jsonb_typeof(u.attributes_json -> CAST('age' AS TEXT)) = 'number' THEN CAST(u.attributes_json ->> CAST('age' AS TEXT) AS DOUBLE PRECISION) < CAST(18.0 AS DOUBLE PRECISION) ELSE FALSE END)
SQL
    postgres/recent-2.10-not-beta) sed "s/@SINCE@/$3/" <<'SQL' ;;
(EXISTS (SELECT 1 FROM registrations sd WHERE sd.username = u.name AND sd.handle IS NOT NULL AND sd.appVersionKey <> '' AND sd.appVersionKey >= '000000002.000000010') AND EXISTS (SELECT 1 FROM registrations sd WHERE sd.username = u.name AND sd.handle IS NOT NULL AND sd.lastSeen >= CAST(@SINCE@ AS DOUBLE PRECISION)) AND (NOT COALESCE(jsonb_typeof(u.attributes_json -> CAST('beta' AS TEXT)) = 'boolean' AND (u.attributes_json ->> CAST('beta' AS TEXT)) = 'true', FALSE)))
SQL
    *) echo "no condition for $1/$2" >&2; return 1 ;;
    esac
}

# The condition and the devices' join as two plain statements (SegmentStore.count runs them as one, over a
# materialized set of the selected users), over CONDITION.
users_query() { echo "SELECT count(*) FROM users u WHERE $1"; }
devices_query() { echo "SELECT count(*) FROM registrations reg JOIN users u ON u.name = reg.username WHERE reg.handle IS NOT NULL AND $1"; }

# --- The data, in ENGINE's words. Every random draw is made once, into the temporary table
# `gen` (one row per user), and read from there: SQLite may evaluate random() once per reference
# of a subquery's column.
hour=$(( $(date +%s) / 3600 * 3600 ))   # lastSeen is kept to the hour
width=$(( ${#n} > 7 ? ${#n} : 7 ))      # user names u0000001…: name order is insertion order
web_auth=$(printf 'A%.0s' $(seq 22))    # base64url of 16 bytes and of a 65-byte point: the
web_p256dh=$(printf 'B%.0s' $(seq 87))  # size of a real subscription (never sent to)
# In ENGINE's words: a random integer 0 to M-1; EXPR as text, zero-padded to WIDTH digits; EXPR
# in hex, zero-padded to WIDTH.
sql_random() { if [ "$1" = sqlite ]; then echo "((random() & 9223372036854775807) % $2)"; else echo "floor(random() * $2)::int"; fi; }
sql_padded() { if [ "$1" = sqlite ]; then echo "printf('%0$3d', $2)"; else echo "lpad(($2)::text, $3, '0')"; fi; }
sql_hex() { if [ "$1" = sqlite ]; then echo "printf('%0$3x', $2)"; else echo "lpad(to_hex($2), $3, '0')"; fi; }
load_sql() { # ENGINE
    local e=$1 generate="" from="FROM generate_series(1, $n) AS s(i)"
    if [ "$e" = sqlite ]; then
        generate="WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $n)"
        from="FROM s"
    fi
    local seq="(g.i * 4 + d.j)" seen="($hour - ((g.rl + d.j * 7919) % 1440) * 3600)"
    cat <<SQL
CREATE TEMP TABLE gen AS $generate
SELECT i, 'u' || $(sql_padded "$e" i "$width") AS name,
       $(sql_random "$e" 1000) AS rp, $(sql_random "$e" 1000) AS ra, $(sql_random "$e" 1000) AS rb, $(sql_random "$e" 40) AS rt,
       $(sql_random "$e" 100) AS rd, $(sql_random "$e" 3) AS rf, $(sql_random "$e" 1000) AS rv, $(sql_random "$e" 1000000) AS rl
$from;

-- Attributes as UserAttributes stores them: keys sorted, no spaces, NULL for none.
INSERT INTO users (name, passwordHash, createdAt, admin, attributes)
SELECT name, 'x', $hour - 90 * 86400, 0,
       CASE WHEN rp < 100 AND ra < 100 AND rb < 100 THEN NULL ELSE
           '{' || substr(CASE WHEN ra < 100 THEN '' ELSE ',"age":' || (13 + ra % 78) END
                         || CASE WHEN rb < 100 THEN '' ELSE ',"beta":' || CASE WHEN rb % 2 = 0 THEN 'true' ELSE 'false' END END
                         || CASE WHEN rp < 100 THEN '' ELSE ',"plan":"' || CASE rp % 3 WHEN 0 THEN 'gold' WHEN 1 THEN 'silver' ELSE 'free' END || '"' END,
                         2) || '}'
       END
FROM gen ORDER BY i;

-- rt % 4 topics (0 to 3), from the (rt / 4)th of the ten on.
WITH d(j) AS (VALUES (0), (1), (2)),
     t(n, topic) AS (VALUES (0, 'news'), (1, 'sports'), (2, 'weather'), (3, 'deals'), (4, 'music'),
                            (5, 'tech'), (6, 'travel'), (7, 'food'), (8, 'games'), (9, 'finance'))
INSERT INTO topics (username, topic, createdAt)
SELECT g.name, t.topic, $hour - 30 * 86400
FROM gen g JOIN d ON d.j < g.rt % 4 JOIN t ON t.n = (g.rt / 4 + d.j) % 10
ORDER BY g.i, d.j;

-- Devices: the version's key is AppVersionKey.of(version) ('' for none: 'beta'; NULL with no version).
WITH d(j) AS (VALUES (0), (1), (2)),
     p(n, platform) AS (VALUES (0, 'apns'), (1, 'fcm'), (2, 'web')),
     v(n, version, vkey) AS (VALUES (0, NULL, NULL), (1, '1.9', '000000001.000000009'), (2, '2.0', '000000002'),
                                    (3, '2.9', '000000002.000000009'), (4, '2.10', '000000002.000000010'),
                                    (5, '2.10.1', '000000002.000000010.000000001'), (6, '2.11', '000000002.000000011'),
                                    (7, '3.0', '000000003'), (8, '3.1.2', '000000003.000000001.000000002'),
                                    (9, 'v3.2-beta', '000000003.000000002'), (10, 'beta', ''))
INSERT INTO registrations (id, username, platform, handle, tags, createdAt, updatedAt, app, appVersion, appVersionKey, lastSeen)
SELECT $(sql_hex "$e" "$seq" 32), g.name, p.platform,
       CASE p.platform
           WHEN 'apns' THEN $(sql_hex "$e" "$seq" 64)
           WHEN 'fcm' THEN 'f' || $seq || ':APA91b' || $(sql_padded "$e" "$seq" 140)
           ELSE '{"endpoint":"https://push.example.net/wpush/' || $seq || '","keys":{"auth":"$web_auth","p256dh":"$web_p256dh"}}'
       END,
       '["username:' || g.name || '"]', $seen, $seen, 'default', v.version, v.vkey, $seen
FROM gen g
JOIN d ON d.j < CASE WHEN g.rd < 10 THEN 0 WHEN g.rd < 75 THEN 1 WHEN g.rd < 95 THEN 2 ELSE 3 END
JOIN p ON p.n = (g.rf + d.j) % 3
JOIN v ON v.n = (g.rv + 5 * d.j) % 11
ORDER BY g.i, d.j;

DROP TABLE gen;
SQL
}

# load ENGINE: the schema and the admin, then N users, their topics and devices; statistics.
load() {
    local engine=$1 t0
    echo "$password" | "$rp" users add admin --admin --password-stdin --data "data-$engine" --database "$(database_of "$engine")" >/dev/null
    t0=$(now)
    load_sql "$engine" > "load-$engine.sql"
    if [ "$engine" = sqlite ]; then
        # One transaction; a rollback journal while nothing else has the file open (a new page
        # needs no journal, where WAL would write each twice) and no fsync: scratch data.
        { echo "PRAGMA journal_mode = DELETE; PRAGMA synchronous = OFF; PRAGMA cache_size = -524288; PRAGMA temp_store = MEMORY; BEGIN;"
          cat "load-$engine.sql"
          echo "COMMIT;"
          [ "${SQLITE_ANALYZE:-1}" = 0 ] || echo "ANALYZE;"
          echo "PRAGMA journal_mode = WAL;"
        } | sqlite3 -bail "$sqlite_file" >/dev/null
    else
        psql_ -1 -f "load-$engine.sql"
        psql_ -c "VACUUM ANALYZE users" -c "VACUUM ANALYZE registrations" -c "VACUUM ANALYZE topics"
    fi
    local totals="SELECT (SELECT count(*) FROM users) || ' users, ' || (SELECT count(*) FROM registrations) || ' devices, ' || (SELECT count(*) FROM topics) || ' topic rows'"
    echo "$engine: $(engine_query "$engine" "$totals") loaded in $(echo "$(now) - $t0" | bc -l | xargs printf %.1f) s" >&2
}

# engine_query ENGINE SQL: one statement's result, unaligned, in a read-only transaction as serve's.
engine_query() {
    if [ "$1" = sqlite ]; then sqlite3 -bail "$sqlite_file" "$2"
    else psql_ -At -c "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" -c "$2" -c "COMMIT"; fi
}


# count SEGMENT -> "seconds users devices": one GET …/count.
count() {
    local seconds
    seconds=$(curl -fsS -u "admin:$password" -o count.json -w '%{time_total}' "http://127.0.0.1:$port/api/admin/segments/$1/count") || return 1
    echo "$seconds $(python3 -c 'import json; c = json.load(open("count.json")); print(c["users"], c["devices"])')"
}

# cli_counts ENGINE CONDITION -> "users devices users-seconds devices-seconds": the two
# statements as serve runs them, in the engine's CLI, timed by it (sqlite3's .timer, psql's
# \timing), in a read-only transaction on PostgreSQL as serve's.
cli_counts() {
    if [ "$1" = sqlite ]; then
        printf '.timer on\n%s;\n%s;\n' "$(users_query "$2")" "$(devices_query "$2")" | sqlite3 -bail "$sqlite_file" > cli.txt || return 1
        awk '/^[0-9]+$/ {c[++i] = $1} /^Run Time:/ {t[++k] = $4} END {print c[1], c[2], t[1], t[2]}' cli.txt
    else
        printf 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;\n\\timing on\n%s;\n%s;\n\\timing off\nCOMMIT;\n' \
            "$(users_query "$2")" "$(devices_query "$2")" | psql_ -At > cli.txt || return 1
        awk '/^[0-9]+$/ {c[++i] = $1} /^Time:/ {t[++k] = $2 / 1000} END {print c[1], c[2], t[1], t[2]}' cli.txt
    fi
}

# plans ENGINE SEGMENT CONDITION: both statements' plans, to stdout.
plans() {
    echo "--- $1, $2: ${filters[$2]}"
    echo "condition: $3"
    if [ "$1" = sqlite ]; then
        printf '.print "users:"\nEXPLAIN QUERY PLAN %s;\n.print "devices:"\nEXPLAIN QUERY PLAN %s;\n' \
            "$(users_query "$3")" "$(devices_query "$3")" | sqlite3 -bail "$sqlite_file"
    else
        printf 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;\n\\echo users:\nEXPLAIN (ANALYZE, BUFFERS) %s;\n\\echo devices:\nEXPLAIN (ANALYZE, BUFFERS) %s;\nCOMMIT;\n' \
            "$(users_query "$3")" "$(devices_query "$3")" | psql_
    fi
    echo
}

results="$work/results.txt"
: > "$results"
failed=0
for engine in $engines; do
    if [ "$engine" = postgres ]; then start_postgres "$work" $pgport; fi
    load "$engine"
    start_serve "$engine" /api/admin/segments
    for segment in "${segments[@]}"; do
        status=$(curl -sS -o saved.json -w '%{http_code}' -u "admin:$password" -X PUT -H 'Content-Type: application/json' \
            -d "{\"filter\":${filters[$segment]}}" "http://127.0.0.1:$port/api/admin/segments/$segment")
        [ "$status" = 200 ] || { echo "PUT /api/admin/segments/$segment: $status $(cat saved.json)" >&2; exit 1; }
    done
    # Each segment once per round, in turns: what the shared machine does meanwhile falls on all alike.
    declare -A times=() counted=()
    for round in $(seq 1 "$rounds"); do
        for segment in "${segments[@]}"; do
            result=$(count "$segment")
            read -r seconds users devices <<< "$result"
            echo "$engine: $segment, round $round: $users users, $devices devices in $seconds s" >&2
            times[$segment]="${times[$segment]:-} $seconds"
            if [ -n "${counted[$segment]:-}" ] && [ "${counted[$segment]}" != "$users $devices" ]; then
                echo "$engine: $segment counted ${counted[$segment]} (users devices) before, $users $devices now" >&2
            fi
            counted[$segment]="$users $devices"
        done
    done
    stop_serve
    # The same statements in the engine's CLI (serve stopped: nothing else runs), and their plans.
    since=$(( $(date +%s) - 30 * 86400 )).0
    if [ "$engine" = sqlite ]; then version="SQLite $(sqlite3 --version | cut -d' ' -f1)"; else version="PostgreSQL $(psql_ -At -c 'SHOW server_version')"; fi
    echo "=== $engine ($version), $n users: each count's condition and devices' join, and their plans"
    for segment in "${segments[@]}"; do
        cond=$(condition "$engine" "$segment" "$since")
        result=$(cli_counts "$engine" "$cond")
        read -r cli_users cli_devices cli_users_s cli_devices_s <<< "$result"
        read -r users devices <<< "${counted[$segment]}"
        check=ok
        if [ "$cli_users $cli_devices" != "$users $devices" ]; then
            check="DIFFERS: $cli_users users, $cli_devices devices"
            echo "$engine: $segment: the API counted $users users and $devices devices, this script's SQL $cli_users and $cli_devices:" \
                 "its condition is out of step with SegmentCondition.swift (or lastSeen crossed an hour between the two)" >&2
        fi
        [ "$users" -gt 0 ] || { echo "$engine: $segment selects no users: the data did not load" >&2; failed=1; }
        plans "$engine" "$segment" "$cond"
        # engine, segment, users, devices, median, each round, the CLI's seconds, target, check
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$engine" "$segment" "$users" "$devices" \
            "$(median_of ${times[$segment]})" "$(echo ${times[$segment]} | sed 's/ / \/ /g')" \
            "$(printf '%.3f + %.3f' "$cli_users_s" "$cli_devices_s")" "${targets[$engine]}" "$check" >> "$results"
    done
    if [ "$engine" = sqlite ]; then
        echo "sqlite: data directory $(du -sh "$work/data-sqlite" | cut -f1)" >&2
        # Not looked at again: the space back before the next engine.
        [ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$work/data-sqlite"
    else
        echo "postgres: database $(psql_ -At -c "SELECT pg_size_pretty(pg_database_size('richpush'))")" >&2
    fi
    unset times counted
done

echo
printf 'counting a segment of %d users (issue #46): GET /api/admin/segments/{name}/count, median of %d rounds\n' "$n" "$rounds"
printf '%-9s %-21s %9s %9s %9s %-27s %-17s %7s %4s  %s\n' engine segment users devices "median s" "rounds (s)" "CLI s: users+dev" target met sql
while IFS=$'\t' read -r engine segment users devices median each cli target check; do
    met=$(echo "$median <= $target" | bc -l | sed 's/1/yes/; s/0/NO/')
    printf '%-9s %-21s %9d %9d %9.3f %-27s %-17s %5s s %4s  %s\n' "$engine" "$segment" "$users" "$devices" "$median" "$each" "$cli" "$target" "$met" "$check"
done < "$results"
printf 'targets (issue #46): at most %s s on SQLite, %s s on PostgreSQL. The API counts in one statement (the users\n' "${targets[sqlite]}" "${targets[postgres]}"
printf 'once, their devices joined to them); "CLI s" is the condition and the join as two plain statements in the\nengine'"'"'s CLI; "sql" compares their counts with the API'"'"'s.\n'
exit "$failed"
