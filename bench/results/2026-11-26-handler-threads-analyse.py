# Tables of bench/README.md "Where handlers run": python3 2026-11-26-handler-threads-analyse.py 2026-11-26-handler-threads.txt
import re,sys,statistics as st
rows=[]
for line in open(sys.argv[1]):
    if 'RESULT' not in line: continue
    d=dict(re.findall(r'(\w+)=(\S+)',line))
    rows.append(d)
def get(r,eng,h,impl,pat):
    for d in rows:
        if d['round']==r and d['engine']==eng and d['handleOnReceivingThread']==h and d['impl']==impl and d['pattern']==pat: return d
rounds=sorted({d['round'] for d in rows},key=int)
metrics=[('uni','msg_per_s','uni, msg/s'),('uni','cpu_ns_per_msg','uni, CPU ns per message'),('rtt','rtt_p50_us','rtt p50'),('rtt','rtt_p99_us','rtt p99'),('rtt','cpu_ns_per_msg','rtt, CPU ns per round trip')]
def table(title,a,b):
    print('\n| '+title+' ('+str(len(rounds))+' rounds) | ratios per round | median |\n|---|---|---|')
    for pat,key,label in metrics:
        rs=[]
        for r in rounds:
            x=get(r,*a,pat); y=get(r,*b,pat)
            if x and y: rs.append(float(x[key])/float(y[key]))
        print('| %s | %s | %.2f |'%(label,' '.join('%.2f'%v for v in rs),st.median(rs)))
def absolute():
    print('\n| variant | uni M msg/s (median, range) | uni CPU ns/msg | rtt p50 µs | rtt p99 µs | rtt CPU µs/round trip |\n|---|---|---|---|---|---|')
    for impl,eng in [('ib','dedicated'),('ib','shared'),('nio','-')]:
        for h in ['false','true']:
            def col(pat,key,scale=1):
                v=[float(d[key])/scale for d in rows if d['impl']==impl and d['engine']==eng and d['handleOnReceivingThread']==h and d['pattern']==pat]
                return '%.3g (%.3g–%.3g)'%(st.median(v),min(v),max(v))
            print('| %s %s %s | %s | %s | %s | %s | %s |'%(impl,eng if eng!='-' else '',('receiving thread' if h=='true' else 'pool'),col('uni','msg_per_s',1e6),col('uni','cpu_ns_per_msg'),col('rtt','rtt_p50_us'),col('rtt','rtt_p99_us'),col('rtt','cpu_ns_per_msg',1000)))
absolute()
table('ib dedicated: receiving thread / pool',('dedicated','true','ib'),('dedicated','false','ib'))
table('ib shared: receiving thread / pool',('shared','true','ib'),('shared','false','ib'))
table('ib pool: shared / dedicated',('shared','false','ib'),('dedicated','false','ib'))
table('ib receiving thread: shared / dedicated',('shared','true','ib'),('dedicated','true','ib'))
table('ib shared + receiving thread / dedicated + pool (the defaults)',('shared','true','ib'),('dedicated','false','ib'))
table('nio: receiving thread / pool',('-','true','nio'),('-','false','nio'))
