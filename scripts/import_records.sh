#!/usr/bin/env bash
# Rebuild the record algorithms of algorithms/ from their publishers' files (algorithms/README.md says which
# and why): every file is converted by `strassenbench algorithms import`, which Brent-checks it and writes its
# source and licence into its header.
#
#   bash scripts/import_records.sh RECORDS     # RECORDS holds perminov/, plinopt/ and alphatensor/
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 1 ] || [ ! -d "$1/perminov" ] || [ ! -d "$1/plinopt" ] || [ ! -f "$1/alphatensor/factorizations_r.npz" ]; then
  echo "usage: scripts/import_records.sh RECORDS (a folder with perminov/, plinopt/ and alphatensor/factorizations_r.npz)" >&2
  exit 2
fi
records=$1
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON; elif [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
import() { "$PY" -m strassenbench algorithms import "$@"; }

# Perminov's collection: the lowest rank of every format 2 <= m <= k <= n <= 5 (file <m>x<k>x<n>_m<R>_Z[T].json).
for file in "$records"/perminov/*.json; do
  base=$(basename "$file" .json)
  dims=${base%%_*}; rank=${base#*_m}; rank=${rank%%_*}
  import "$file" --out "algorithms/perminov-$dims-$rank.txt"
done

# PLinOpt: the two rank-48 4x4 algorithms and the addition-reduced 4x4x4:49 and 3x3x3:23.
for name in 4x4x4_48_rational 4x4x4_48_accurate 4x4x4_49_156 3x3x3_23_58; do
  import "$records/plinopt/${name}_L.sms" --out "algorithms/plinopt-${name//_/-}.txt"
done

# AlphaTensor: the formats that no other file here ties or beats in rank (every format with a side of 6 or more)
# and whose products fit the fused kernels (at most 16 blocks per operand: algorithms/README.md lists the rest),
# and its 4x4x4:49 and 3x4x5:47 beside Perminov's for comparison.
for format in 2,2,6:21 2,2,7:25 2,2,8:28 3,4,11:103 3,5,9:105 3,9,11:225 4,5,9:139 4,5,11:169 5,5,7:134 \
              4,4,4:49 3,4,5:47; do
  key=${format%:*}; rank=${format#*:}; out="algorithms/alphatensor-${key//,/x}-$rank.txt"
  import "$records/alphatensor/factorizations_r.npz" --key "$key" --out "$out"
  grep -q "^# alphatensor-${key//,/x}-$rank <$key;$rank>:" "$out" || { echo "$out: not of rank $rank" >&2; exit 1; }
done
