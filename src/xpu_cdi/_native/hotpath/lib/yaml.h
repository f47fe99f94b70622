/* YAML into the JSON tree of json.h, through libyaml's event parser:
 * CDI specs written as YAML (by generate or by another tool) and the node
 * config file (/etc/xpu-cdi/config.yaml).
 *
 * Values are typed as the CDI Go library reads YAML (sigs.k8s.io/yaml: go-yaml
 * v2, then JSON): plain scalars resolve as YAML 1.1 does there (null: "", ~,
 * null; booleans: true/false, yes/no, on/off, y/n in their three spellings;
 * integers: decimal, 0x hex, 0b binary, 0o or leading-0 octal, '_' ignored;
 * floats: [-+]digits[.digits][e...]); quoted and block scalars are strings;
 * map keys become strings (1 -> "1", true -> "true").
 *
 * Strict as the JSON parser: at most FJ_MAX_DEPTH levels and FJ_MAX_BYTES
 * bytes, one document, no duplicate keys, no tags but the core ones
 * (!!str, !!map, !!seq, and !!int/!!float/!!bool/!!null on a value of that
 * type), no merge keys (<<), no infinite or NaN numbers.  An alias shares
 * its anchor's node (nothing is copied: treat a YAML tree as read-only),
 * and the tree as aliases expand it may have at most FY_MAX_NODES nodes:
 * a "billion laughs" document is refused as soon as it reaches that. */
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
