# Sourced by scripts/bench/bringup.sh, department.sh and boot.sh: a course of COUNT students on
# IMAGE (a core, MIB MiB and a 1 GiB root each, and whatever else the options ask), its roster
# users PREFIX01, PREFIX02, ... each with the one public key in PUB. The caller sets $cohort.
# Users are named by run: an account an earlier run made keeps that run's key (a roster adds no
# key to an existing account), and no login with this run's key would succeed.
#   bench_class CODE IMAGE MIB PREFIX COUNT PUB [course create options...]
bench_class() {
  local code=$1 image=$2 mib=$3 prefix=$4 count=$5 pub=$6 roster i
  shift 6
  "$cohort" course create "$code" --title bench --image "$image" --cpu 1 --memory "${mib}MiB" \
    --disk 1GiB "$@" >/dev/null
  roster=$(mktemp)
  {
    echo "username,name,email,ssh_key"
    for i in $(seq -w 1 "$count"); do echo "$prefix$i,,,$(cat "$pub")"; done
  } >"$roster"
  "$cohort" course roster "$code" "$roster" >/dev/null
  rm -f "$roster"
}
