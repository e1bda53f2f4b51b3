# Shared by the benchmarks that ingest generated records (bench/scale.sh, bench/rebuild.sh):
# source it from the repository's root.

# site_toml WORK: the site configuration of a benchmark's database in WORK, on stdout (append
# more sections after it). The generated users are invented (uid 2000.. may be someone else
# here): their names are not checked.
site_toml() {
    cat <<TOML
[database]
path = "$1/mpistat.db"
[escalation]
list = "$1/escalation.list"
[ingest]
check_user_names = false
TOML
}
