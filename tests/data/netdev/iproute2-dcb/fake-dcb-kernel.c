/* Answers iproute2 dcb's RTM_GETDCB / DCB_CMD_IEEE_GET as a kernel with DCB would (the
 * layouts of linux/dcbnl.h), then the ACK, for LD_PRELOAD under `dcb ... show`:
 * FAKE_DCB_PFC the pfc_en bit mask (pfc_cap 8), FAKE_DCB_DSCP "DSCP:PRIO,..." the APP
 * table's DSCP entries (selector 5). */
#include <stdint.h>
#include <string.h>
#include <stddef.h>
#include <sys/types.h>
#include <stdlib.h>

struct nlh { uint32_t len; uint16_t type, flags; uint32_t seq, pid; };
static uint32_t last_seq;
static unsigned char *put_attr(unsigned char *p, uint16_t type, const void *val, uint16_t vlen) {
    uint16_t len = 4 + vlen;
    memcpy(p, &len, 2); memcpy(p + 2, &type, 2); memcpy(p + 4, val, vlen);
    memset(p + len, 0, ((len + 3) & ~3) - len);
    return p + ((len + 3) & ~3);
}
ssize_t mnl_socket_sendto(const void *nl, const void *buf, size_t len) {
    const struct nlh *h = buf; last_seq = h->seq; (void)nl; return (ssize_t)len;
}
ssize_t mnl_socket_recvfrom(const void *nl, void *buf, size_t bufsiz) {
    (void)nl; (void)bufsiz;
    unsigned char apps[64], *a = apps, ieee[512], *i = ieee, pfc[136] = {0};
    const char *mask = getenv("FAKE_DCB_PFC"), *dscp = getenv("FAKE_DCB_DSCP");
    pfc[0] = 8; pfc[1] = mask ? (unsigned char)strtoul(mask, NULL, 0) : 0;
    while (dscp && *dscp) {
        char *end;
        unsigned long d = strtoul(dscp, &end, 10), prio = strtoul(end + 1, &end, 10);
        unsigned char app[4] = {5, (unsigned char)prio, (unsigned char)d, 0};
        a = put_attr(a, 1, app, 4);
        dscp = *end ? end + 1 : end;
    }
    i = put_attr(i, 2, pfc, sizeof pfc);
    i = put_attr(i, 3 | 0x8000, apps, (uint16_t)(a - apps));
    unsigned char *out = buf;
    struct nlh h = {0, 78, 0, last_seq, 0};
    unsigned char dcbm[4] = {0, 21, 0, 0};
    unsigned char *p = out + sizeof h;
    memcpy(p, dcbm, 4); p += 4;
    p = put_attr(p, 13 | 0x8000, ieee, (uint16_t)(i - ieee));
    h.len = (uint32_t)(p - out); memcpy(out, &h, sizeof h);
    struct nlh ack = {sizeof(struct nlh) + 4 + sizeof(struct nlh), 2, 0, last_seq, 0};
    memcpy(p, &ack, sizeof ack); p += sizeof ack;
    int32_t err = 0; memcpy(p, &err, 4); p += 4;
    struct nlh orig = {0, 78, 0, last_seq, 0}; memcpy(p, &orig, sizeof orig); p += sizeof orig;
    return p - out;
}
