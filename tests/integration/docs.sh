#!/usr/bin/env bash
# What the documents list must be what the code and the install script do
# (DESIGN.md: Operations): the settings table of the operator's manual,
# docs/OPERATIONS.md, and the dependency list of README.md.
. "$(dirname "$0")/lib.sh"

# The STORAGE_* names `--help` prints under "settings:", one per line.
help_settings() {
    env -i PATH="$PATH" ${ASAN_OPTIONS:+ASAN_OPTIONS=$ASAN_OPTIONS} "$BIN" --help |
        awk '/^settings:/ { on = 1; next } on && /^[^ ]/ { on = 0 }
             on && /^  STORAGE_[A-Z0-9_]+ / { print $1 }' | sort -u
}

# The STORAGE_* names in the first column of docs/OPERATIONS.md's settings
# table.
manual_settings() {
    awk '/^## Settings/ { on = 1; next } on && /^## / { on = 0 }
         on && /^\| `STORAGE_/ { print }' "$TOP/docs/OPERATIONS.md" |
        grep -oE '`STORAGE_[A-Z0-9_]+`' | tr -d '`' | grep -v '^STORAGE_RDKAFKA_$' | sort -u
}

test_manual_settings_table_lists_exactly_the_settings_the_code_accepts() {
    local code manual
    code=$(help_settings)
    manual=$(manual_settings)
    [ "$(echo "$code" | grep -c .)" -ge 20 ] || fail "--help lists too few settings: [$code]"
    local missing extra
    missing=$(comm -23 <(echo "$code") <(echo "$manual"))
    extra=$(comm -13 <(echo "$code") <(echo "$manual"))
    [ -z "$missing" ] || fail "settings the code accepts but docs/OPERATIONS.md does not list: $missing"
    [ -z "$extra" ] || fail "settings docs/OPERATIONS.md lists but the code does not accept: $extra"
}

test_readme_names_every_debian_package_the_install_script_installs() {
    local packages p missing=
    packages=$(sed -n '/^PACKAGES="/,/"$/p' "$TOP/scripts/install-deps.sh" | tr -d '"' |
        sed 's/^PACKAGES=//' | tr ' ' '\n' | grep .)
    [ "$(echo "$packages" | wc -l)" -ge 5 ] || fail "no package list found in scripts/install-deps.sh"
    local table
    table=$(awk '/^## Dependencies/ { on = 1; next } on && /^## / { on = 0 } on' "$TOP/README.md")
    for p in $packages; do
        case "$table" in *"\`$p\`"*) ;; *) missing="$missing $p" ;; esac
    done
    [ -z "$missing" ] || fail "installed by scripts/install-deps.sh but not in the README's dependency list:$missing"
}

run_tests
