/* adm.h: the control port: health, readiness, marks. */
#ifndef TM_ADM_H
#define TM_ADM_H

#include <stddef.h>

struct tm_proxy;
struct adm;

/* Serve the control port on px->cfg->admin.listen. NULL with err. */
struct adm *adm_new(struct tm_proxy *px, char *err, size_t errlen);
void adm_free(struct adm *a);

#endif
