#!/usr/bin/env bash
# JupyterLab through the portal, against a running deployment whose student has a container made
# from the Jupyter image (images/jupyter). Run on the container's node (the direct requests go
# to the container's address on the node network, as the agent's do). Measures, in one run:
#   1. "Open JupyterLab" to kernel ready: GET /jupyter/NAME/lab, then a new kernel
#      (POST api/kernels) until it answers kernel_info on its websocket (kernel_ready.py);
#   2. the portal's added latency per request: N sequential GET api/status through the portal
#      (browser -> controller -> agent tunnel -> container) against N straight to
#      ADDRESS:8888 on the node, median of each and their ratio.
# Packets go only to the portal's URL and the container's address.
#
#   jupyter.sh PORTAL_URL USER INSTANCE ADDRESS [N]     (password in COHORT_PASSWORD; N = 50)
#
# The kernel it starts is shut down on exit.
set -euo pipefail
portal=${1:?usage: jupyter.sh PORTAL_URL USER INSTANCE ADDRESS [N]}
user=${2:?user}
instance=${3:?instance}
address=${4:?container address}
n=${5:-50}
password=${COHORT_PASSWORD:?set COHORT_PASSWORD to the portal password of USER}
[ "$n" -ge 1 ] && [ "$n" -le 1000 ] || { echo "Error: N must be 1 to 1000" >&2; exit 2; }
jar=$(mktemp)
kernel=
base="$portal/jupyter/$instance"
# The portal's certificate is the deployment's own CA's: -k, as a first visit in a browser.
c() { curl -ksS --max-time 30 -b "$jar" -c "$jar" "$@"; }
xsrf() { awk '$6 == "_xsrf" { print $7 }' "$jar" | tail -n 1; }
cleanup() {
  if [ -n "$kernel" ]; then
    c -o /dev/null -X DELETE -H "X-XSRFToken: $(xsrf)" "$base/api/kernels/$kernel" || true
  fi
  rm -f "$jar"
}
trap cleanup EXIT

# Sign in as the browser does: the form's CSRF field matches its double-submit cookie.
csrf=$(c "$portal/signin" | sed -n 's/.*name="csrf" value="\([^"]*\)".*/\1/p' | head -n 1)
[ -n "$csrf" ] || { echo "Error: no sign-in form at $portal/signin" >&2; exit 1; }
code=$(c -o /dev/null -w '%{http_code}' --data-urlencode "csrf=$csrf" \
  --data-urlencode "username=$user" --data-urlencode "password=$password" "$portal/signin")
[ "$code" = 303 ] || { echo "Error: sign-in answered $code" >&2; exit 1; }

now() { date +%s.%N; }
start=$(now)
code=$(c -o /dev/null -w '%{http_code}' "$base/lab")
[ "$code" = 200 ] || { echo "Error: $base/lab answered $code" >&2; exit 1; }
kernel=$(c -X POST -H "X-XSRFToken: $(xsrf)" -H 'Content-Type: application/json' \
  -d '{"name": "python3"}' "$base/api/kernels" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
# Ready as a student's browser sees it: its websocket to the kernel gets kernel_info answered
# (the REST state stays "starting" until a client connects).
"$(dirname "$0")/kernel_ready.py" "$base/api/kernels/$kernel/channels" "$jar" 60
ready=$(python3 -c "print(f'{$(now) - $start:.2f}')")

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
through=$(for _ in $(seq 1 "$n"); do
  c -o /dev/null -w '%{time_total}\n' "$base/api/status"
done | median)
direct=$(for _ in $(seq 1 "$n"); do
  curl -sS --max-time 30 -o /dev/null -w '%{time_total}\n' "http://$address:8888/jupyter/$instance/api/status"
done | median)

echo "| measure | value |"
echo "|---|---|"
echo "| Open JupyterLab to kernel ready (s) | $ready |"
echo "| GET api/status through the portal, median of $n (ms) | $(python3 -c "print(f'{$through * 1000:.1f}')") |"
echo "| GET api/status direct to the container, median of $n (ms) | $(python3 -c "print(f'{$direct * 1000:.1f}')") |"
echo "| added per request (ms) | $(python3 -c "print(f'{($through - $direct) * 1000:.1f}')") |"
echo "| portal/direct | $(python3 -c "print(f'{$through / $direct:.1f}')") |"
