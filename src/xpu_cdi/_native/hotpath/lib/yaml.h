/* YAML into the JSON tree of json.h, through libyaml's event parser: CDI
 * specs written as YAML and the node config file.  Typed as the CDI Go
 * library reads YAML (go-yaml v2, then JSON) and as strict as the JSON
 * parser: docs/architecture.md, "Parsers".  An alias shares its anchor's
 * node (treat a YAML tree as read-only), and the tree as aliases expand it
 * is bounded (FY_MAX_NODES): a "billion laughs" document is refused. */
#ifndef XF_YAML_H
#define XF_YAML_H
#include "lib/json.h"

#define FY_MAX_NODES 2000000

/* FY_CDI_SPEC: the document is a CDI spec; as the Go library's typed
 * structs do, every scalar becomes a string (5 -> "5", yes -> "true",
 * 0.5 -> "0.5") except the values of its number fields (major, minor,
 * fileMode, uid, gid, timeout, additionalGids) and boolean fields
 * (enableMonitoring, enableCMT, enableMBM), which keep their type. */
#define FY_CDI_SPEC 1

/* Parse exactly one YAML document (an empty stream is null).  NULL on any
 * error, with one line in err ("duplicate key "a" at line 3, column 1"). */
fj *fy_parse(const char *text, size_t len, int flags, char *err, size_t errlen);

/* libyaml loaded (on first use: yaml_load.c says why): 1, or 0 with one
 * line in err naming the package to install. */
int fy_load_library(char *err, size_t errlen);

#endif
