{{/* The namespace of every namespaced object: namespaceOverride, else the release's. */}}
{{- define "xpu-cdi.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* The image of every container: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "xpu-cdi.image" -}}
{{- $repo := .Values.image.repository -}}
{{- with .Values.global.imageRegistry }}{{ $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}{{ end -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion (toString .Values.image.tag)) -}}
{{- end -}}

{{/* The DRA driver's service account, as the API server names its user. */}}
{{/* The plugin's service account: its own, that may read Nodes, when a node label picks its config. */}}
{{- define "xpu-cdi.devicePluginServiceAccount" -}}
{{- if .Values.devicePlugin.config.map -}}xpu-cdi-device-plugin-config{{- else -}}xpu-cdi{{- end -}}
{{- end -}}

{{- define "xpu-cdi.devicePluginUser" -}}
{{- printf "system:serviceaccount:%s:%s" (include "xpu-cdi.namespace" .) (include "xpu-cdi.devicePluginServiceAccount" .) -}}
{{- end -}}

{{- define "xpu-cdi.draUser" -}}
{{- printf "system:serviceaccount:%s:xpu-cdi-dra-driver" (include "xpu-cdi.namespace" .) -}}
{{- end -}}

{{/*
The node config (/etc/xpu-cdi/config.yaml, src/xpu_cdi/nodeconfig.py) the DaemonSets write.  The
same for the device plugin's and the DRA driver's: which of them serves a node is the node label
xpu-cdi.io/kubernetes-allocation alone (their selectors), so the file names a way only where the
admin set allocation.  Its first line marks it as ours (xpu-cdi.nodeConfigInit).
*/}}
{{- define "xpu-cdi.nodeConfig" -}}
{{- $v := .Values -}}
{{ include "xpu-cdi.nodeConfigMark" . }}
accept-env-selection-when-unprivileged: false
{{- if $v.allocation.kinds }}
kubernetes-allocation:
{{- range $kind, $way := $v.allocation.kinds }}
  {{ $kind }}: {{ $way }}
{{- end }}
{{- else if $v.allocation.default }}
kubernetes-allocation: {{ $v.allocation.default }}
{{- end }}
{{- if $v.runtimeWiring.enabled }}
configure-containerd: true
restart-containerd: {{ $v.runtimeWiring.restartContainerd }}
{{- end }}
{{- end -}}

{{- define "xpu-cdi.nodeConfigMark" -}}
# written by the xpu-cdi DaemonSets, rewritten when they start: delete this line to keep your edits
{{- end -}}

{{/*
The node-config init container's script: installs /node-config/config.yaml (temp + mv) where the
host has no node config, or one whose first line is our mark: this release's, or the one the DRA
DaemonSet of earlier releases wrote, whose `kubernetes-allocation: dra` made the device plugin refuse the
node after a switch back.  A file an admin wrote (no mark) is left alone.
*/}}
{{- define "xpu-cdi.nodeConfigInit" -}}
- >-
  d=/etc/xpu-cdi; f=$d/config.yaml;
  if test -e $f && ! head -n 1 $f | grep -qxF
  -e '{{ include "xpu-cdi.nodeConfigMark" . }}'
  -e '# written to /etc/xpu-cdi/config.yaml by the DRA DaemonSet where the host has none';
  then echo "$f: the admin's own, left alone"; exit 0; fi;
  cp /node-config/config.yaml $d/.config.yaml.new && mv $d/.config.yaml.new $f
{{- end -}}

{{/*
The device plugin's config file (src/xpu_cdi/deviceplugin/config.py: NVIDIA's shape, version: v1,
flags: as the long flags in camelCase, sharing:) from devicePlugin's values: only what differs from
the plugin's defaults, `{}` when nothing does.
*/}}
{{- define "xpu-cdi.devicePluginConfig" -}}
{{- $dp := .Values.devicePlugin -}}
{{- $flags := dict -}}
{{- if and $dp.resourceNaming (ne $dp.resourceNaming "kind") -}}
{{- $_ := set $flags "resourceNaming" $dp.resourceNaming -}}
{{- end -}}
{{- if $dp.resourceNames -}}
{{- $_ := set $flags "resourceName" $dp.resourceNames -}}
{{- end -}}
{{- if $dp.evict -}}
{{- $_ := set $flags "evict" $dp.evict -}}
{{- end -}}
{{- $cfg := dict -}}
{{- if $flags -}}
{{- $_ := set $cfg "flags" $flags -}}
{{- end -}}
{{- if $dp.sharing -}}
{{- $_ := set $cfg "sharing" $dp.sharing -}}
{{- end -}}
{{- if $cfg -}}
{{- $_ := set $cfg "version" "v1" -}}
{{- toYaml $cfg -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/*
The named configs of devicePlugin.config.map (a node label picks one: docs/device-plugin.md, "A
config per node") as a ConfigMap's data, a key per name: each config as given (YAML text, or a
mapping written as YAML), and "default" the chart's own (xpu-cdi.devicePluginConfig) unless the map
has one.  Empty when the map is.
*/}}
{{- define "xpu-cdi.devicePluginConfigs" -}}
{{- $map := .Values.devicePlugin.config.map -}}
{{- if $map -}}
{{- $out := dict -}}
{{- range $name, $cfg := $map -}}
{{- $_ := set $out $name (ternary $cfg (toYaml $cfg) (kindIs "string" $cfg)) -}}
{{- end -}}
{{- if not (hasKey $out "default") -}}
{{- $_ := set $out "default" (include "xpu-cdi.devicePluginConfig" .) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
{{- end -}}

{{/*
The device-plugin-config container (root: ., once: as the init container): the node's label picks a
named config of /etc/xpu-cdi/device-plugin-configs, written to the plugin's config file.  Its token is
the projected volume's, mounted here only.
*/}}
{{- define "xpu-cdi.configSelector" -}}
{{- $root := .root -}}
- name: device-plugin-config{{ if .once }}-init{{ end }}
  image: {{ include "xpu-cdi.image" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  command: ["/usr/bin/xpu-cdi"]
  args: ["device-plugin-config"{{ if .once }}, "--once"{{ end }}, "--configs-dir", "/etc/xpu-cdi/device-plugin-configs",
         "--default-config", {{ toJson $root.Values.devicePlugin.config.default }}, "--output", "/etc/xpu-cdi/device-plugin/config.yaml"
         {{- include "xpu-cdi.daemonArgs" (dict "root" $root "c" $root.Values.devicePlugin) }}]
  env:
    - name: NODE_NAME
      valueFrom:
        fieldRef: {fieldPath: spec.nodeName}
  terminationMessagePath: /tmp/termination-log  # as for generate
  terminationMessagePolicy: FallbackToLogsOnError
  resources: {{- toYaml (index $root.Values.resources "device-plugin-config") | nindent 4 }}
  securityContext:
    runAsUser: 0
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: ["ALL"]
  volumeMounts:
    - {name: device-plugin-configs, mountPath: /etc/xpu-cdi/device-plugin-configs, readOnly: true}
    - {name: device-plugin-config, mountPath: /etc/xpu-cdi/device-plugin}
    - {name: device-plugin-config-token, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}
{{- end -}}

{{/* The DRA driver's config file (`xpu-cdi dra-driver --config`, docs/dra.md "Remediation"). */}}
{{- define "xpu-cdi.draDriverConfig" -}}
{{- if .Values.dra.remediation -}}
{{- toYaml (dict "version" "v1" "remediation" .Values.dra.remediation) -}}
{{- else -}}
{}
{{- end -}}
{{- end -}}

{{/* Values the schema cannot check across fields: one line each. */}}
{{- define "xpu-cdi.checks" -}}
{{- $v := .Values -}}
{{- $cfg := $v.devicePlugin.config -}}
{{- if and $cfg.map (ne $cfg.default "default") (not (hasKey $cfg.map $cfg.default)) -}}
{{- fail (printf "devicePlugin.config.default is %s, which devicePlugin.config.map does not name: give one of %s, or default (the chart's devicePlugin settings)" $cfg.default (keys $cfg.map | sortAlpha | join ", ")) -}}
{{- end -}}
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

{{/*
A DaemonSet's pod settings from its component's values (c: .Values.devicePlugin, ...) over the
global ones: the pod template's metadata (our labels over podLabels, checksums over podAnnotations).
*/}}
{{- define "xpu-cdi.podMeta" -}}
{{- $v := .root.Values -}}
labels: {{- toYaml (merge (dict) .labels (default dict .c.podLabels) (default dict $v.podLabels)) | nindent 2 }}
{{- $ann := merge (dict) (default dict .annotations) (default dict .c.podAnnotations) (default dict $v.podAnnotations) }}
{{- with $ann }}
annotations: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The pod spec's scheduling: priorityClassName, nodeSelector and tolerations (the component's own when
"own", else the component's when set, else the global ones), affinity (the component's or the
global; "notDra" adds, to each of its required node terms, the device plugin's keeping off the nodes
labelled for DRA) and the pull secrets (imagePullSecrets and global.imagePullSecrets).
*/}}
{{- define "xpu-cdi.scheduling" -}}
{{- $v := .root.Values -}}
{{- $c := .c -}}
priorityClassName: {{ default $v.priorityClassName $c.priorityClassName }}
{{- $sel := $c.nodeSelector }}{{ $tol := $c.tolerations }}
{{- if not .own }}{{ $sel = default $v.nodeSelector $c.nodeSelector }}{{ $tol = default $v.tolerations $c.tolerations }}{{ end }}
nodeSelector: {{- toYaml (default dict $sel) | nindent 2 }}
{{- $aff := deepCopy (default dict (default $v.affinity $c.affinity)) -}}
{{- if .notDra }}
{{- $na := default dict $aff.nodeAffinity -}}
{{- $req := default dict (get $na "requiredDuringSchedulingIgnoredDuringExecution") -}}
{{- $keep := dict "key" "xpu-cdi.io/kubernetes-allocation" "operator" "NotIn" "values" (list "dra") -}}
{{- $terms := list -}}
{{- range (default (list (dict)) $req.nodeSelectorTerms) -}}
{{- $t := deepCopy . -}}
{{- $_ := set $t "matchExpressions" (append (default list $t.matchExpressions) $keep) -}}
{{- $terms = append $terms $t -}}
{{- end -}}
{{- $_ := set $req "nodeSelectorTerms" $terms -}}
{{- $_ := set $na "requiredDuringSchedulingIgnoredDuringExecution" $req -}}
{{- $_ := set $aff "nodeAffinity" $na -}}
{{- end }}
{{- with $aff }}
affinity: {{- toYaml . | nindent 2 }}
{{- end }}
tolerations: {{- toYaml (default list $tol) | nindent 2 }}
{{- $secrets := list -}}
{{- range concat (default list $v.imagePullSecrets) (default list $v.global.imagePullSecrets) -}}
{{- $s := . -}}
{{- if kindIs "string" . }}{{ $s = dict "name" . }}{{ end -}}
{{- if not (has $s $secrets) }}{{ $secrets = append $secrets $s }}{{ end -}}
{{- end -}}
{{- with $secrets }}
imagePullSecrets: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* A DaemonSet's updateStrategy: the component's, else the global, else the DaemonSet's own (def). */}}
{{- define "xpu-cdi.updateStrategy" -}}
{{- with (default .def (default .root.Values.updateStrategy .c.updateStrategy)) -}}
updateStrategy: {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/*
More of a daemon's flow-list args: --log-level (the component's logLevel, else the global; not
with "noLog", for a command without one) and, with "extra", the component's extraArgs.  Each begins with ", ": append inside the ["...", ...].
*/}}
{{- define "xpu-cdi.daemonArgs" -}}
{{- if not .noLog }}{{ with (default .root.Values.logLevel .c.logLevel) }}, "--log-level", {{ toJson . }}{{ end }}{{ end }}
{{- if .extra }}{{ range .c.extraArgs }}, {{ toJson (toString .) }}{{ end }}{{ end }}
{{- end -}}

{{/* The parts that need a newer Kubernetes than the chart's kubeVersion (the device plugin's 1.28). */}}
{{- define "xpu-cdi.kubeChecks" -}}
{{- $kube := .Capabilities.KubeVersion.Version -}}
{{- if and .Values.dra.enabled (semverCompare "<1.34.0-0" $kube) -}}
{{- fail (printf "dra.enabled needs Kubernetes 1.34 or later (resource.k8s.io/v1), this cluster is %s: leave dra.enabled off, the device plugin serves the cards from 1.28" $kube) -}}
{{- end -}}
{{- if and .Values.labels.enabled (semverCompare "<1.30.0-0" $kube) -}}
{{- fail (printf "labels.enabled needs Kubernetes 1.30 or later (its admission policy and the node name in its token), this cluster is %s: label the nodes yourself (kubectl label node <node> xpu-cdi.io/present=true)" $kube) -}}
{{- end -}}
{{- end -}}
