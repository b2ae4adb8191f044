/* adm_page.c: a small live page on the control port. The HTML carries its
 * own style and script; the script polls /v1/recent once a second. */
#include "adm_page.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "../../conf/cfg.h"
#include "../json.h"
#include "../recent.h"
#include "../tidemark.h"

static const char page[] =
    "<!doctype html>\n"
    "<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<title>tidemark</title>\n"
    "<style>\n"
    "body{font:14px/1.35 system-ui,sans-serif;margin:0;color:#1d2433;backgr"
    "ound:#f6f7f9}\n"
    "header{display:flex;flex-wrap:wrap;align-items:baseline;gap:.4em 1.6em"
    ";padding:.7em 1.2em;background:#1d2433;color:#fff}\n"
    "header h1{font-size:1.25em;margin:0}\n"
    "header .k{color:#9aa5b8;margin-right:.3em}\n"
    ".pill{padding:.05em .55em;border-radius:.8em;font-weight:600}\n"
    ".ok{background:#1f7a4d}.bad{background:#b3261e}.off{background:#5b6475"
    "}\n"
    "main{padding:.4em 1.2em 1.2em}\n"
    "h2{font-size:1em;margin:1em 0 .35em}\n"
    ".grid{display:grid;grid-template-columns:1fr 1fr;gap:0 1.6em}\n"
    "table{border-collapse:collapse;width:100%;background:#fff}\n"
    "th,td{text-align:left;padding:.18em .6em;border-bottom:1px solid #e3e6"
    "eb;white-space:nowrap}\n"
    "th{background:#eef0f4;font-weight:600}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "tr.refusal td{background:#fdecea}\n"
    "tr.fenced-out td{background:#fff4d6;font-weight:600}\n"
    "td.s409{color:#a33c00;font-weight:600}td.s503,td.s502,td.s504{color:#b"
    "3261e;font-weight:600}\n"
    ".empty{color:#6b7384;font-style:italic}\n"
    "#state{color:#9aa5b8}\n"
    "</style></head><body>\n"
    "<header><h1>tidemark <span id=\"version\"></span></h1>\n"
    "<span><span class=\"k\">store</span><span id=\"store\" class=\"pill of"
    "f\">?</span></span>\n"
    "<span><span class=\"k\">locks</span><span id=\"locks\" class=\"pill of"
    "f\">?</span></span>\n"
    "<span><span class=\"k\">watches</span><span id=\"watches\" class=\"pil"
    "l off\">?</span></span>\n"
    "<span><span class=\"k\">up</span><span id=\"uptime\"></span></span>\n"
    "<span><span class=\"k\">since</span><span id=\"started\"></span></span"
    ">\n"
    "<span><span class=\"k\">accepted</span><b id=\"accepted\">0</b></span>"
    "\n"
    "<span><span class=\"k\">refused</span><b id=\"refused\">0</b></span>\n"
    "<span id=\"state\">loading&hellip;</span></header>\n"
    "<main>\n"
    "<h2>Refusals, newest first</h2>\n"
    "<table id=\"refusals\"><thead><tr><th>when</th><th>status</th><th>reas"
    "on</th><th>route</th><th>resource</th><th>token</th><th>mark</th></tr>"
    "</thead><tbody></tbody></table>\n"
    "<h2>Writes and refusals, newest first</h2>\n"
    "<table id=\"events\"><thead><tr><th>when</th><th>status</th><th>reaso"
    "n</th><th>resource</th><th>token</th><th>mark</th><th>client</th><th>r"
    "equest id</th></tr></thead><tbody></tbody></table>\n"
    "<div class=\"grid\"><div>\n"
    "<h2>Current marks</h2>\n"
    "<table id=\"marks\"><thead><tr><th>resource</th><th>mark</th><th>last "
    "write</th></tr></thead><tbody></tbody></table>\n"
    "</div><div>\n"
    "<h2>Held locks</h2>\n"
    "<table id=\"locks-held\"><thead><tr><th>lock</th><th>fence</th><th>tim"
    "e left</th><th>holder</th><th>mark</th></tr></thead><tbody></tbody></tab"
    "le>\n"
    "</div></div>\n"
    "<h2>Timeline, last 60 s</h2><p id=\"tlnote\">Writes accepted (green) "
    "and refusals (red), a lane per resource: run tidemark-lab --target "
    "against this sidecar to watch a stale write refused.</p>\n"
    "<svg id=\"tl\" width=\"900\" height=\"22\"></svg>\n"
    "<h2>Routes</h2>\n"
    "<table id=\"routes\"><thead><tr><th>route</th><th>methods</th><th>path"
    "</th><th>resource</th><th>mode</th><th>upstream</th></tr></thead><tbod"
    "y></tbody></table>\n"
    "</main>\n"
    "<script>\n"
    "var NS='http://www.w3.org/2000/svg';\n"
    "function el(n,a,p,t){var e=document.createElementNS(NS,n);for(var k in "
    "a)e.setAttribute(k,a[k]);if(t!==undefined)e.textContent=t;p.appendChild(e)"
    ";return e;}\n"
    "function timeline(d){var "
    "s=document.getElementById('tl'),now=Date.now(),W=900,L=200,ev=[],lanes=[];"
    "\n"
    "d.events.forEach(function(f){if(f.resource)ev.push({r:f.resource,t:f."
    "when_ms,k:f.accepted?'mark':'refused',x:(f.accepted?'accepted, '+(f."
    "status===null?'in flight':f.status+(f.reason==='accepted'?'':' '+f.rea"
    "son)):f.status+' '+f.reason)+', token '+f.token+', mark '+f.mark+', fr"
    "om '+"
    "f.client+', id '+f.request_id});});\n"
    "ev=ev.filter(function(e){return now-e.t<60000;});\n"
    "ev.sort(function(a,b){return(a.k==='refused')-(b.k==='refused');});\n"
    "ev.forEach(function(e){if(lanes.indexOf(e.r)<0)lanes.push(e.r);});\n"
    "s.textContent='';s.setAttribute('height',lanes.length*26+22);\n"
    "lanes.forEach(function(r,i){var "
    "g=el('g',{'class':'tl-lane','data-lane':r},s);el('line',{x1:L,x2:W-8,y1:i*"
    "26+13,y2:i*26+13,stroke:'#ddd'},g);el('text',{x:4,y:i*26+17,'font-size':"
    "12},g,r);});\n"
    "[60,45,30,15,0].forEach(function(a){el('text',{x:L+(W-L-10)*(1-a/"
    "60),y:lanes.length*26+16,'font-size':10,fill:'#777','text-anchor':'middle'"
    "},s,a?'-'+a+' s':'now');});\n"
    "ev.forEach(function(e){var "
    "x=L+(W-L-10)*(1-Math.max(0,now-e.t)/"
    "60000),y=lanes.indexOf(e.r)*26+13,g=el('g',{'class':'tl-'+e.k},s);el('"
    "title',{},g,new Date(e.t).toLocaleTimeString()+': '+e.x);\n"
    "if(e.k==='mark')el('circle',{cx:x,cy:y,r:6,fill:'#17803d'},g);else "
    "el('path',{d:'M'+(x-5)+' '+(y-5)+'l10 10m0 -10l-10 "
    "10',stroke:'#b42318','stroke-width':3},g);});}\n"
    "function p2(n){return(n<10?'0':'')+n;}\n"
    "function when(s){var d=new Date(s*1000),o=-d.getTimezoneOffset(),a=Mat"
    "h.abs(o);\n"
    "return d.getFullYear()+'-'+p2(d.getMonth()+1)+'-'+p2(d.getDate())+' '+"
    "p2(d.getHours())+':'+p2(d.getMinutes())+':'+p2(d.getSeconds())+' UTC'+"
    "(o?(o<0?'-':'+')+p2(Math.floor(a/60))+':'+p2(a%60):'');}\n"
    "function span(s){s=Math.max(0,Math.floor(s));var d=Math.floor(s/86400)"
    ",h=Math.floor(s%86400/3600),m=Math.floor(s%3600/60);\n"
    "return d?d+'d '+h+'h':h?h+'h '+p2(m)+'m':m?m+'m '+p2(s%60)+'s':s+'s';}"
    "\n"
    "function fill(id,rows,cols,cls,none){var tb=document.querySelector('#'"
    "+id+' tbody');tb.textContent='';\n"
    "if(!rows.length){var tr=tb.insertRow(),td=tr.insertCell();td.colSpan=c"
    "ols.length;td.className='empty';td.textContent=none;return;}\n"
    "rows.forEach(function(r){var tr=tb.insertRow();if(cls)tr.className=t"
    "ypeof cls==='function'?cls(r):cls;cols.forEach(function(c){var "
    "td=tr.insertCell(),v=c.f?c.f(r):r[c.k];"
    "\n"
    "td.textContent=v===null||v===undefined?'\\u2014':v;if(c.n)td.className"
    "='n';if(c.k==='status')td.className='n s'+v;});});}\n"
    "function pill(id,on,ok){var e=document.getElementById(id);e.textConten"
    "t=!on?'off':ok?'ready':'unavailable';e.className='pill '+(!on?'off':ok"
    "?'ok':'bad');}\n"
    "var m=location.hash.match(/token=([^&]+)/),hdr={};if(m)hdr.Authorizati"
    "on='Bearer '+decodeURIComponent(m[1]);\n"
    "function text(id,v){document.getElementById(id).textContent=v;}\n"
    "function tick(){fetch('/v1/recent',{cache:'no-store',headers:hdr}).the"
    "n(function(r){\n"
    "if(!r.ok)throw new Error('HTTP '+r.status+(r.status===401?' (open this"
    " page as /#token=...)':''));return r.json();}).then(function(d){\n"
    "text('version',d.version);pill('store',true,d.ready.store);pill('locks"
    "',d.ready.locks!==null,d.ready.locks);\n"
    "pill('watches',d.ready.watches!==null,d.ready.watches);\n"
    "text('uptime',span(d.now_ms/1000-d.started));text('started',when(d.sta"
    "rted));text('accepted',d.accepted);text('refused',d.refused);\n"
    "fill('refusals',d.refusals.slice(0,12),[{k:'when',f:function(r){return "
    "when(r.when"
    ");}},{k:'status'},{k:'reason'},{k:'route'},{k:'resource'},{k:'token',n"
    ":1},{k:'mark',n:1}],'refusal','no refusal yet');\n"
    "fill('events',d.events.slice(0,20),[{k:'when',f:function(r){return "
    "when(r.when);}},{k:'status',f:function(r){return r.status===null?'in "
    "flight':r.status;}},{k:'reason'},{k:'resource'},{k:'token',n:1},{k:'mark',"
    "n:1},{k:'client'},{k:'request_id'}],function(r){return r.accepted?'':'re"
    "fusal';},'no write yet');\n"
    "fill('marks',d.marks,[{k:'resource'},{k:'mark',n:1},{k:'when',f:functi"
    "on(r){return when(r.when);}}],'','no fenced write yet');\n"
    "fill('locks-held',d.locks,[{k:'name'},{k:'fence',n:1},{k:'ttl_left_ms'"
    ",n:1,f:function(r){return(r.ttl_left_ms/1000).toFixed(1)+' s';}},{k:'"
    "holder'},{k:'mark',n:1,f:function(r){return r.below_mark?r.mark+"
    "' \\u2014 fence below the mark: fenced out':r.mark?r.mark:null;}}],"
    "'','no lease held through this sidecar');\n"
    "document.querySelectorAll('#locks-held tbody tr').forEach(function(tr,i)"
    "{if(d.locks[i]&&d.locks[i].below_mark)tr.className='fenced-out';});\n"
    "fill('routes',d.routes,[{k:'name'},{k:'methods'},{k:'path'},{k:'resour"
    "ce'},{k:'mode'},{k:'upstream'}],'','no route');\n"
    "timeline(d);"
    "text('state',(d.draining?'draining \\u00b7 ':'')+'updated '+when(d.now"
    "_ms/1000));}).catch(function(e){text('state','cannot reach tidemark: '"
    "+e);});}\n"
    "tick();setInterval(tick,1000);\n"
    "</script></body></html>\n";

void
adm_page_html(struct evbuffer *out)
{
    evbuffer_add(out, page, sizeof(page) - 1);
}

static void
json_field(struct evbuffer *b, const char *key, const char *v, bool first)
{
    evbuffer_add_printf(b, "%s\"%s\":\"", first ? "" : ",", key);
    json_escape(b, v, strlen(v));
    evbuffer_add(b, "\"", 1);
}

static const char *
mode_name(enum tm_mode m)
{
    return m == TM_MODE_EFFICIENCY ? "efficiency"
           : m == TM_MODE_OFF      ? "off"
                                   : "correctness";
}

/* The route's methods as written, space-separated ("*": every method);
 * cut with "..." when they do not fit in buf. */
static void
methods_text(const struct tm_methods *m, char *buf, size_t len)
{
    size_t n = 0;

    snprintf(buf, len, "%s", m->n == 0 ? "*" : "");
    for (size_t i = 0; i < m->n; i++) {
        if (n + m->v[i].len + 5 > len) {
            snprintf(buf + n, len - n, " ...");
            return;
        }
        n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? " " : "",
                              m->v[i].name);
    }
}

/* A resource or lock name: {"KEY":"...", as JSON. */
static void
json_name(struct evbuffer *b, size_t i, const char *key, const char *v)
{
    evbuffer_add(b, i ? ",{" : "{", i ? 2 : 1);
    json_field(b, key, v, true);
}

/* A token or a status, or null (0: none). */
static void
num_or_null(char *buf, size_t len, int64_t v)
{
    if (v == 0) {
        snprintf(buf, len, "null");
    } else {
        snprintf(buf, len, "%" PRId64, v);
    }
}

/* ,"events_total":N,"events":[...]: the history, newest first. */
static void
events_json(const struct recent *r, struct evbuffer *b)
{
    size_t n = recent_nevents(r);

    evbuffer_add_printf(b, ",\"events_total\":%" PRIu64 ",\"events\":[",
                        r->nevents);
    for (size_t i = 0; i < n; i++) {
        const struct recent_event *e = recent_event_at(r, i);
        char token[24], status[24];

        num_or_null(token, sizeof(token), e->token);
        num_or_null(status, sizeof(status), e->status);
        json_name(b, i, "reason", e->reason);
        json_field(b, "route", e->route, false);
        json_field(b, "resource", e->resource, false);
        json_field(b, "client", e->client, false);
        json_field(b, "request_id", e->rid, false);
        evbuffer_add_printf(b,
                            ",\"seq\":%" PRIu64 ",\"accepted\":%s"
                            ",\"status\":%s,\"token\":%s"
                            ",\"mark\":%" PRId64 ",\"when\":%lld"
                            ",\"when_ms\":%" PRId64 "}",
                            r->nevents - i, e->accepted ? "true" : "false",
                            status, token, e->mark, (long long)e->when,
                            e->when_ms);
    }
    evbuffer_add(b, "]", 1);
}

void
adm_recent_json(const struct recent *r, const struct tm_config *cfg,
                const struct page_status *st, struct evbuffer *b)
{
    int64_t now = recent_now_ms();
    size_t n, shown = 0;

    evbuffer_add_printf(
        b,
        "{\"version\":\"%s\",\"started\":%lld,\"now_ms\":%" PRId64
        ",\"ready\":{\"store\":%s,\"locks\":%s,\"watches\":%s},"
        "\"draining\":%s,\"accepted\":%" PRIu64 ",\"refused\":%zu,\"routes\":[",
        tm_version(), (long long)r->started, now,
        st->store_ready ? "true" : "false",
        !st->locks_on     ? "null"
        : st->locks_ready ? "true"
                          : "false",
        !st->watches_on     ? "null"
        : st->watches_ready ? "true"
                            : "false",
        st->draining ? "true" : "false", r->accepted, r->nrefusals);
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cfg_route *rt = &cfg->routes[i];
        char methods[256];

        methods_text(&rt->methods, methods, sizeof(methods));
        json_name(b, i, "name", rt->name);
        json_field(b, "methods", methods, false);
        json_field(b, "path", rt->path_src ? rt->path_src : "", false);
        json_field(b, "resource",
                   rt->resource_from_header
                       ? "header"
                       : (rt->resource_src ? rt->resource_src : ""),
                   false);
        json_field(b, "mode", mode_name(rt->mode), false);
        json_field(b, "upstream", rt->upstream ? rt->upstream : "", false);
        evbuffer_add(b, "}", 1);
    }
    evbuffer_add(b, "],\"marks\":[", 11);
    for (size_t i = 0; i < r->nmarks; i++) {
        const struct recent_mark *m = recent_mark_at(r, i);

        json_name(b, i, "resource", m->resource);
        evbuffer_add_printf(b,
                            ",\"mark\":%" PRId64 ",\"when\":%lld"
                            ",\"when_ms\":%" PRId64 "}",
                            m->mark, (long long)m->when, m->when_ms);
    }
    evbuffer_add(b, "],\"locks\":[", 11);
    for (size_t i = 0; i < r->nlocks; i++) {
        const struct recent_lock *l = &r->locks[i];

        if (l->expires_ms <= now) {
            continue;
        }
        int64_t mark = recent_known_mark(r, l->name);

        json_name(b, shown++, "name", l->name);
        json_field(b, "holder", l->holder, false);
        evbuffer_add_printf(b,
                            ",\"fence\":%" PRId64 ",\"ttl_left_ms\":%" PRId64
                            ",\"mark\":%" PRId64 ",\"below_mark\":%s}",
                            l->fence, l->expires_ms - now, mark,
                            l->fence < mark ? "true" : "false");
    }
    evbuffer_add(b, "],\"refusals\":[", 14);
    n = r->nrefusals < RECENT_N ? r->nrefusals : RECENT_N;
    for (size_t i = 0; i < n; i++) {
        const struct recent_event *f =
            &r->refusals[(r->nrefusals - 1 - i) % RECENT_N];
        char token[24];

        num_or_null(token, sizeof(token), f->token);
        json_name(b, i, "reason", f->reason);
        json_field(b, "route", f->route, false);
        json_field(b, "resource", f->resource, false);
        evbuffer_add_printf(b,
                            ",\"status\":%d,\"token\":%s,\"mark\":%" PRId64
                            ",\"when\":%lld,\"when_ms\":%" PRId64 "}",
                            f->status, token, f->mark, (long long)f->when,
                            f->when_ms);
    }
    evbuffer_add(b, "]", 1);
    events_json(r, b);
    evbuffer_add(b, "}\n", 2);
}
