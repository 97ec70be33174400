#!/usr/bin/env python3
# cluster-runs-table.py - one line per run of bench/cluster-matrix.sh, grouped by scenario, from
# the tables in its logs (bench/results/*cluster-matrix*.txt); a row printed twice (a log has the
# table at each run and at its end) counts once.
#   python3 bench/cluster-runs-table.py LOG...
import re,sys,collections
files=sys.argv[1:]
rows=collections.OrderedDict()
seen=set()
for f in files:
    hdr=None
    for line in open(f,errors='replace'):
        line=line.rstrip('\n')
        if line.startswith('scenario ') and ' run ' in line:
            hdr=line.split(); continue
        if hdr is None: continue
        m=re.match(r'^([a-z0-9-]+)\s+(\d+)\s',line)
        if not m or m.group(1) in ('scenario',): continue
        parts=line.split()
        # verdict may contain spaces: take the fixed columns before fail_by
        d=dict(zip(hdr,parts))
        key=(line.strip())
        if key in seen: continue
        seen.add(key)
        d['_file']=f.split('/')[-1]; d['_line']=line
        rows.setdefault(m.group(1),[]).append(d)
for sc,rs in rows.items():
    print(f"== {sc}: {len(rs)} runs")
    for d in rs:
        print(f"   {d['_file']:45s} sent {d.get('sent'):>6} deliv {d.get('deliv'):>6} lost_r {d.get('lost_r'):>6} LOST_U {d.get('LOST_U'):>3} dup {d.get('dup')} reord {d.get('reord')} corr {d.get('corr')} req {d.get('req')} ans {d.get('ans')} hung {d.get('hung')}  verdict {' '.join(d['_line'].split()[-1:])}")
