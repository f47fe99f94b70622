{{/* The namespace of every namespaced object: namespaceOverride, else the release's. */}}
{{- define "xpu-cdi.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* The image of every container: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "xpu-cdi.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion (toString .Values.image.tag)) -}}
{{- end -}}

{{/* The DRA driver's service account, as the API server names its user. */}}
{{- define "xpu-cdi.draUser" -}}
{{- printf "system:serviceaccount:%s:xpu-cdi-dra-driver" (include "xpu-cdi.namespace" .) -}}
{{- end -}}

{{/*
The node config (/etc/xpu-cdi/config.yaml, src/xpu_cdi/nodeconfig.py) a DaemonSet writes on a
host that has none.  Called with (dict "ctx" $ "way" "dra"): the way for every kind when
allocation names none (the DRA DaemonSet's nodes give every kind to DRA).
*/}}
{{- define "xpu-cdi.nodeConfig" -}}
{{- $v := .ctx.Values -}}
accept-env-selection-when-unprivileged: false
{{- if $v.allocation.kinds }}
kubernetes-allocation:
{{- range $kind, $way := $v.allocation.kinds }}
  {{ $kind }}: {{ $way }}
{{- end }}
{{- else if (default .way $v.allocation.default) }}
kubernetes-allocation: {{ default .way $v.allocation.default }}
{{- end }}
{{- if $v.runtimeWiring.enabled }}
configure-containerd: true
restart-containerd: {{ $v.runtimeWiring.restartContainerd }}
{{- end }}
{{- end -}}

{{/*
The device plugin's config file (src/xpu_cdi/deviceplugin/config.py: keys as the long flags) from
devicePlugin's values: only what differs from the plugin's defaults, `{}` when nothing does.
*/}}
{{- define "xpu-cdi.devicePluginConfig" -}}
{{- $dp := .Values.devicePlugin -}}
{{- $cfg := dict -}}
{{- if and $dp.resourceNaming (ne $dp.resourceNaming "kind") -}}
{{- $_ := set $cfg "resource-naming" $dp.resourceNaming -}}
{{- end -}}
{{- if $dp.resourceNames -}}
{{- $_ := set $cfg "resource-name" $dp.resourceNames -}}
{{- end -}}
{{- if $dp.sharing -}}
{{- $_ := set $cfg "sharing" $dp.sharing -}}
{{- end -}}
{{- if $cfg -}}
{{- toYaml $cfg -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* Values the schema cannot check across fields: one line each. */}}
{{- define "xpu-cdi.checks" -}}
{{- $v := .Values -}}
{{- if and $v.allocation.default $v.allocation.kinds -}}
{{- fail "allocation: set default (one way for every kind) or kinds (a way per kind), not both: the node config holds one of them" -}}
{{- end -}}
{{- range $kind, $way := $v.allocation.kinds -}}
{{- if and (eq $way "dra") (not $v.dra.enabled) -}}
{{- fail (printf "allocation.kinds gives %s to dra, but dra.enabled is false: enable it or give the kind to device-plugin" $kind) -}}
{{- end -}}
{{- if and (eq $way "device-plugin") (not $v.devicePlugin.enabled) -}}
{{- fail (printf "allocation.kinds gives %s to device-plugin, but devicePlugin.enabled is false: enable it or give the kind to dra" $kind) -}}
{{- end -}}
{{- end -}}
{{- if and (eq (toString $v.allocation.default) "dra") (not $v.dra.enabled) -}}
{{- fail "allocation.default is dra, but dra.enabled is false: enable it (--set dra.enabled=true)" -}}
{{- end -}}
{{- if and (eq (toString $v.allocation.default) "device-plugin") (not $v.devicePlugin.enabled) -}}
{{- fail "allocation.default is device-plugin, but devicePlugin.enabled is false: enable it" -}}
{{- end -}}
{{- $dp := $v.devicePlugin -}}
{{- if and (not $dp.enabled) (or $dp.sharing $dp.resourceNames (eq (toString $dp.resourceNaming) "model")) -}}
{{- fail "devicePlugin.sharing, .resourceNames and .resourceNaming are the device plugin's settings, but devicePlugin.enabled is false: enable it or leave them out" -}}
{{- end -}}
{{- if $dp.sharing -}}
{{- $seen := dict -}}
{{- range $dp.sharing.timeSlicing.resources -}}
{{- if hasKey $seen .name -}}
{{- fail (printf "devicePlugin.sharing.timeSlicing.resources names %s twice: give each resource one entry" .name) -}}
{{- end -}}
{{- $_ := set $seen .name true -}}
{{- end -}}
{{- end -}}
{{- if and $v.monitoring.serviceMonitor.enabled (not $v.exporter.enabled) -}}
{{- fail "monitoring.serviceMonitor.enabled needs exporter.enabled: the ServiceMonitor scrapes the exporter's Service" -}}
{{- end -}}
{{- end -}}
