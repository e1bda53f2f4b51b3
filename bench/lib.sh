# Shared by the benchmarks that ingest generated records (bench/scale.sh, bench/rebuild.sh):
# source it from the repository's root.

# site_toml WORK [DATABASE]: the site configuration of a benchmark's database on stdout (append
# more sections after it): DATABASE is an SQLite file's path or a `postgresql://` URL (default:
# WORK/mpistat.db). The generated users are invented (uid 2000.. may be someone else here):
# their names are not checked.
site_toml() {
    local database=${2:-$1/mpistat.db}
    if is_database_url "$database"; then
        printf '[database]\nurl = "%s"\n' "$database"
    else
        printf '[database]\npath = "%s"\n' "$database"
    fi
    cat <<TOML
[escalation]
list = "$1/escalation.list"
[ingest]
check_user_names = false
TOML
}

# is_database_url LOCATION: whether LOCATION names a PostgreSQL database rather than a file.
is_database_url() {
    [[ $1 == postgresql://* || $1 == postgres://* ]]
}
