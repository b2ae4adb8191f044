/* adm_page.c: a small live page on the control port. The HTML carries its
 * own style and script; the script polls /v1/recent once a second. */
#include "adm_page.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "problem.h"
#include "proxy_int.h"

static const char page[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    "<title>tidemark</title>\n<style>\n"
    "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\n"
    "h1{font-size:1.3em}h2{font-size:1.05em;margin-top:1.5em}\n"
    "table{border-collapse:collapse;min-width:40em}\n"
    "th,td{text-align:left;padding:.2em .8em;border-bottom:1px solid #ddd}\n"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".s409{color:#a40}.s503,.s502,.s504{color:#b00}\n"
    "#state{color:#666}\n</style></head><body>\n"
    "<h1>tidemark</h1><p id=\"state\">loading&hellip;</p>\n"
    "<h2>Routes</h2><table id=\"routes\"><thead><tr><th>route</th>"
    "<th>methods</th><th>path</th><th>resource</th><th>mode</th>"
    "<th>upstream</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Recent marks</h2><table id=\"marks\"><thead><tr><th>resource</th>"
    "<th>mark</th><th>when</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Recent refusals</h2><table id=\"refusals\"><thead><tr><th>when"
    "</th><th>status</th><th>reason</th><th>route</th><th>resource</th>"
    "<th>token</th><th>mark</th></tr></thead><tbody></tbody></table>\n"
    "<h2>Timeline, last 60 s</h2><p id=\"tlnote\">Marks raised (green) "
    "and refusals (red), a lane per resource: run tidemark-lab --target "
    "against this sidecar to watch a stale write refused.</p>\n"
    "<svg id=\"tl\" width=\"900\" height=\"22\"></svg>\n"
    "<script>\n"
    "var NS='http://www.w3.org/2000/svg';\n"
    "function el(n,a,p,t){var e=document.createElementNS(NS,n);for(var k in "
    "a)e.setAttribute(k,a[k]);if(t!==undefined)e.textContent=t;p.appendChild(e)"
    ";return e;}\n"
    "function timeline(d){var "
    "s=document.getElementById('tl'),now=Date.now(),W=900,L=200,ev=[],lanes=[];"
    "\n"
    "d.marks.forEach(function(m){ev.push({r:m.resource,t:m.when_ms,k:'mark',x:'"
    "mark '+m.mark});});\n"
    "d.refusals.forEach(function(f){if(f.resource)ev.push({r:f.resource,t:f."
    "when_ms,k:'refused',x:f.status+' '+f.reason+', token '+f.token+', mark "
    "'+f.mark});});\n"
    "ev=ev.filter(function(e){return now-e.t<60000;});\n"
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
    "function cell(tr,v,cls){var td=document.createElement('td');"
    "td.textContent=v;if(cls)td.className=cls;tr.appendChild(td);}\n"
    "function fill(id,rows,cols){var tb=document.querySelector('#'+id+"
    "' tbody');tb.textContent='';rows.forEach(function(r){"
    "var tr=document.createElement('tr');cols.forEach(function(c){"
    "var v=r[c[0]];if(c[0]==='when')v=new Date(v*1000)"
    ".toLocaleTimeString();cell(tr,v,c[1]==='n'?'n':(c[0]==='status'?"
    "'s'+v:''));});tb.appendChild(tr);});}\n"
    "var m=location.hash.match(/token=([^&]+)/),hdr={};"
    "if(m)hdr.Authorization='Bearer '+decodeURIComponent(m[1]);\n"
    "function tick(){fetch('/v1/recent',{cache:'no-store',headers:hdr})"
    ".then(function(r){if(!r.ok)throw new Error('HTTP '+r.status+"
    "(r.status===401?' (open this page as /#token=...)':''));"
    "return r;}).then("
    "function(r){return r.json();}).then(function(d){"
    "fill('routes',d.routes,[['name'],['methods'],['path'],['resource'],"
    "['mode'],['upstream']]);"
    "fill('marks',d.marks,[['resource'],['mark','n'],['when']]);"
    "fill('refusals',d.refusals,[['when'],['status','n'],['reason'],"
    "['route'],['resource'],['token','n'],['mark','n']]);"
    "timeline(d);"
    "document.getElementById('state').textContent='updated '+"
    "new Date().toLocaleTimeString();}).catch(function(e){"
    "document.getElementById('state').textContent='cannot reach tidemark: '"
    "+e;});}\ntick();setInterval(tick,1000);\n</script></body></html>\n";

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

void
adm_recent_json(const struct tm_proxy *px, struct evbuffer *b)
{
    const struct tm_config *cfg = px->cfg;
    const struct recent *r = &px->recent;
    size_t n;

    evbuffer_add(b, "{\"routes\":[", 11);
    for (size_t i = 0; i < cfg->nroutes; i++) {
        const struct cfg_route *rt = &cfg->routes[i];
        char methods[256];

        methods_text(&rt->methods, methods, sizeof(methods));
        evbuffer_add(b, i ? ",{" : "{", i ? 2 : 1);
        json_field(b, "name", rt->name, true);
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
    n = r->nmarks < RECENT_N ? r->nmarks : RECENT_N;
    for (size_t i = 0; i < n; i++) {
        const struct recent_mark *m = &r->marks[(r->nmarks - 1 - i) % RECENT_N];
        evbuffer_add(b, i ? ",{" : "{", i ? 2 : 1);
        json_field(b, "resource", m->resource, true);
        evbuffer_add_printf(b,
                            ",\"mark\":%" PRId64 ",\"when\":%lld"
                            ",\"when_ms\":%" PRId64 "}",
                            m->mark, (long long)m->when, m->when_ms);
    }
    evbuffer_add(b, "],\"refusals\":[", 14);
    n = r->nrefusals < RECENT_N ? r->nrefusals : RECENT_N;
    for (size_t i = 0; i < n; i++) {
        const struct recent_refusal *f =
            &r->refusals[(r->nrefusals - 1 - i) % RECENT_N];
        evbuffer_add(b, i ? ",{" : "{", i ? 2 : 1);
        json_field(b, "reason", f->reason, true);
        json_field(b, "route", f->route, false);
        json_field(b, "resource", f->resource, false);
        evbuffer_add_printf(b,
                            ",\"status\":%d,\"token\":%" PRId64
                            ",\"mark\":%" PRId64 ",\"when\":%lld"
                            ",\"when_ms\":%" PRId64 "}",
                            f->status, f->token, f->mark, (long long)f->when,
                            f->when_ms);
    }
    evbuffer_add(b, "]}\n", 3);
}
