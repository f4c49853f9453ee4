package validate

import (
	"fmt"
	"net"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	monv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// maintainerImage is the repository the kustomizations' images: transformer
// sets; a container with this image runs the maintainer.
const maintainerImage = "ghcr.io/iceberg-maintainer/maintainer"

// httpPort is the maintainer's serving port, named "http".
const httpPort = 8080

// configCase is a maintainer config as a container sees it, for the binary
// to validate: the files its volumes put in place and its environment.
type configCase struct {
	source     string
	command    string            // serve or run
	configPath string            // --config, inside the container
	files      map[string]string // path inside the container -> content
	dirs       []string          // emptyDir mount paths
	mountPaths []string
	env        map[string]string
}

// pod is a pod template found in a workload.
type pod struct {
	owner  *object
	labels map[string]string
	spec   *corev1.PodSpec
}

func podOf(o *object) *pod {
	switch v := o.typed.(type) {
	case *appsv1.Deployment:
		return &pod{o, v.Spec.Template.Labels, &v.Spec.Template.Spec}
	case *appsv1.StatefulSet:
		return &pod{o, v.Spec.Template.Labels, &v.Spec.Template.Spec}
	case *batchv1.Job:
		return &pod{o, v.Spec.Template.Labels, &v.Spec.Template.Spec}
	case *batchv1.CronJob:
		return &pod{o, v.Spec.JobTemplate.Spec.Template.Labels, &v.Spec.JobTemplate.Spec.Template.Spec}
	}
	return nil
}

// checkPolicy checks one build's objects: API-level rules the strict
// decoding cannot see, the security and probe policy, and the maintainer's
// own contract (config, grace period, exit codes, sidecar).
func checkPolicy(b *build, r *result) {
	for _, o := range b.objs {
		checkMeta(o, r)
		if p := podOf(o); p != nil {
			checkPod(b, p, r)
		}
		switch v := o.typed.(type) {
		case *appsv1.Deployment:
			checkSelector(o, v.Spec.Selector, v.Spec.Template.Labels, r)
		case *batchv1.CronJob:
			checkCronJob(o, v, r)
		case *batchv1.Job:
			checkJob(o, &v.Spec, r)
		case *corev1.Service:
			checkService(b, o, v, r)
		case *monv1.ServiceMonitor:
			checkServiceMonitor(b, o, v, r)
		case *monv1.PodMonitor:
			checkPodMonitor(b, o, v, r)
		case *policyv1.PodDisruptionBudget:
			checkPDB(b, o, v, r)
		}
	}
}

func checkMeta(o *object, r *result) {
	if o.name == "" {
		r.problem("%s: metadata.name is empty", o.source)
	} else if errs := validation.IsDNS1123Subdomain(o.name); len(errs) > 0 {
		r.problem("%s: metadata.name: %s", o.source, strings.Join(errs, "; "))
	}
	if o.kind == "Service" {
		if errs := validation.IsDNS1035Label(o.name); len(errs) > 0 {
			r.problem("%s: a Service name must be a DNS-1035 label: %s", o.source, strings.Join(errs, "; "))
		}
	}
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := yaml.Unmarshal(o.yaml, &m); err != nil {
		r.problem("%s: %v", o.source, err)
		return
	}
	if m.Metadata.Namespace != "" {
		r.problem("%s: sets namespace %q; the manifests are namespace-less (kubectl apply -k ... -n NS, or namespace: in an overlay)", o.source, m.Metadata.Namespace)
	}
	checkLabels(o.source+": metadata.labels", m.Metadata.Labels, r)
}

func checkLabels(where string, l map[string]string, r *result) {
	for k, v := range l {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			r.problem("%s: key %q: %s", where, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			r.problem("%s: value %q: %s", where, v, strings.Join(errs, "; "))
		}
	}
}

func checkSelector(o *object, sel *metav1.LabelSelector, podLabels map[string]string, r *result) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	switch {
	case err != nil:
		r.problem("%s: selector: %v", o.source, err)
	case s.Empty():
		r.problem("%s: empty selector", o.source)
	case !s.Matches(labels.Set(podLabels)):
		r.problem("%s: selector %s does not match the pod template's labels %v", o.source, s, podLabels)
	}
}

// selects reports whether sel matches any pod template of the build.
func selectsPod(b *build, sel metav1.LabelSelector) bool {
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil || s.Empty() {
		return false
	}
	for _, o := range b.objs {
		if p := podOf(o); p != nil && s.Matches(labels.Set(p.labels)) {
			return true
		}
	}
	return false
}

func checkPod(b *build, p *pod, r *result) {
	src := p.owner.source
	spec := p.spec
	checkLabels(src+": pod template labels", p.labels, r)
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		r.problem("%s: automountServiceAccountToken must be false (nothing here calls the Kubernetes API)", src)
	}
	if sa := spec.ServiceAccountName; sa != "" && b.find("ServiceAccount", sa) == nil {
		r.problem("%s: serviceAccountName %q is not in this build", src, sa)
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 {
			r.problem("%s: volume %q: %s", src, v.Name, strings.Join(errs, "; "))
		}
		if _, dup := volumes[v.Name]; dup {
			r.problem("%s: volume %q defined twice", src, v.Name)
		}
		volumes[v.Name] = v
		switch {
		case v.ConfigMap != nil:
			if b.find("ConfigMap", v.ConfigMap.Name) == nil && !isOptional(v.ConfigMap.Optional) {
				r.problem("%s: volume %q: ConfigMap %q is not in this build", src, v.Name, v.ConfigMap.Name)
			}
		case v.Secret != nil:
			if secretKeys(b, v.Secret.SecretName, r) == nil && !isOptional(v.Secret.Optional) {
				r.problem("%s: volume %q: Secret %q is neither in this build nor documented in base/secret.example.yaml", src, v.Name, v.Secret.SecretName)
			}
		}
	}
	names := map[string]bool{}
	type ctr struct {
		c       *corev1.Container
		init    bool
		sidecar bool
	}
	var all []ctr
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		all = append(all, ctr{c, true, c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways})
	}
	for i := range spec.Containers {
		all = append(all, ctr{&spec.Containers[i], false, false})
	}
	if len(spec.Containers) == 0 {
		r.problem("%s: no containers", src)
	}
	for _, x := range all {
		c := x.c
		where := fmt.Sprintf("%s: container %q", src, c.Name)
		if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
			r.problem("%s: name: %s", where, strings.Join(errs, "; "))
		}
		if names[c.Name] {
			r.problem("%s: duplicate container name", where)
		}
		names[c.Name] = true
		if x.init && !x.sidecar && c.RestartPolicy != nil {
			r.problem("%s: an init container's restartPolicy may only be Always", where)
		}
		if !x.init && c.RestartPolicy != nil {
			r.problem("%s: restartPolicy is only for init containers (native sidecars)", where)
		}
		if x.init && !x.sidecar && (c.StartupProbe != nil || c.ReadinessProbe != nil || c.LivenessProbe != nil) {
			r.problem("%s: probes on an init container need restartPolicy: Always", where)
		}
		checkImage(where, c.Image, r)
		checkSecurity(where, psc, c.SecurityContext, r)
		checkResources(where, c.Resources, r)
		for _, e := range c.Env {
			if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
				r.problem("%s: env %q: %s", where, e.Name, strings.Join(errs, "; "))
			}
		}
		ports := map[string]int32{}
		for _, pt := range c.Ports {
			if pt.Name != "" {
				if errs := validation.IsValidPortName(pt.Name); len(errs) > 0 {
					r.problem("%s: port name %q: %s", where, pt.Name, strings.Join(errs, "; "))
				}
				ports[pt.Name] = pt.ContainerPort
			}
		}
		for _, pr := range []struct {
			kind string
			p    *corev1.Probe
		}{{"startupProbe", c.StartupProbe}, {"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}} {
			if pr.p == nil {
				continue
			}
			var port intstr.IntOrString
			switch h := pr.p.ProbeHandler; {
			case h.HTTPGet != nil:
				port = h.HTTPGet.Port
				if h.HTTPGet.Host != "" {
					r.problem("%s: %s sets host %q: kubelet would probe that host, not this pod", where, pr.kind, h.HTTPGet.Host)
				}
			case h.TCPSocket != nil:
				port = h.TCPSocket.Port
			default:
				continue
			}
			if port.Type == intstr.String {
				if _, ok := ports[port.StrVal]; !ok {
					r.problem("%s: %s uses port %q, which the container does not name", where, pr.kind, port.StrVal)
				}
			}
		}
		for _, m := range c.VolumeMounts {
			v, ok := volumes[m.Name]
			if !ok {
				r.problem("%s: volumeMount %q names no volume", where, m.Name)
				continue
			}
			if (v.Secret != nil || v.ConfigMap != nil) && !m.ReadOnly {
				r.problem("%s: volumeMount %q (a Secret or ConfigMap) must be readOnly", where, m.Name)
			}
		}
		if isMaintainer(c) {
			checkMaintainer(b, p, c, x.init, x.sidecar, volumes, r)
		}
	}
}

func isOptional(b *bool) bool { return b != nil && *b }

func isMaintainer(c *corev1.Container) bool {
	return strings.HasPrefix(c.Image, maintainerImage+":") || strings.HasPrefix(c.Image, maintainerImage+"@")
}

func checkImage(where, image string, r *result) {
	switch {
	case image == "":
		r.problem("%s: no image", where)
	case image == "iceberg-maintainer":
		r.problem("%s: image %q was not rewritten: the kustomization needs the images: entry for it", where, image)
	case strings.Contains(image, "@sha256:"):
	default:
		i := strings.LastIndex(image, ":")
		if i < 0 || strings.Contains(image[i:], "/") {
			r.problem("%s: image %q has no tag", where, image)
		} else if image[i+1:] == "latest" {
			r.problem("%s: image %q uses the latest tag", where, image)
		}
	}
}

func checkSecurity(where string, psc *corev1.PodSecurityContext, sc *corev1.SecurityContext, r *result) {
	if sc == nil {
		r.problem("%s: no securityContext", where)
		return
	}
	nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	if !nonRoot {
		r.problem("%s: runAsNonRoot must be true", where)
	}
	uid := sc.RunAsUser
	if uid == nil {
		uid = psc.RunAsUser
	}
	if uid == nil || *uid == 0 {
		r.problem("%s: runAsUser must be set to a non-zero uid", where)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		r.problem("%s: readOnlyRootFilesystem must be true", where)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		r.problem("%s: allowPrivilegeEscalation must be false", where)
	}
	if sc.Privileged != nil && *sc.Privileged {
		r.problem("%s: privileged", where)
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		r.problem("%s: capabilities.drop must contain ALL", where)
	} else if len(sc.Capabilities.Add) > 0 {
		r.problem("%s: adds capabilities %v", where, sc.Capabilities.Add)
	}
	sp := sc.SeccompProfile
	if sp == nil {
		sp = psc.SeccompProfile
	}
	if sp == nil || (sp.Type != corev1.SeccompProfileTypeRuntimeDefault && sp.Type != corev1.SeccompProfileTypeLocalhost) {
		r.problem("%s: seccompProfile must be RuntimeDefault (or Localhost)", where)
	}
}

func checkResources(where string, res corev1.ResourceRequirements, r *result) {
	for _, need := range []struct {
		what string
		list corev1.ResourceList
		name corev1.ResourceName
	}{
		{"requests.cpu", res.Requests, corev1.ResourceCPU},
		{"requests.memory", res.Requests, corev1.ResourceMemory},
		{"limits.memory", res.Limits, corev1.ResourceMemory},
	} {
		q, ok := need.list[need.name]
		if !ok || q.Sign() <= 0 {
			r.problem("%s: resources.%s must be set", where, need.what)
		}
	}
	for name, lim := range res.Limits {
		if req, ok := res.Requests[name]; ok && req.Cmp(lim) > 0 {
			r.problem("%s: resources.requests.%s %s exceeds its limit %s", where, name, req.String(), lim.String())
		}
	}
}

// maintainerConfig is the part of maintainer.yaml the manifests depend on.
type maintainerConfig struct {
	Lock struct {
		Backend string `json:"backend"`
	} `json:"lock"`
	Server struct {
		Listen    string `json:"listen"`
		TokenFile string `json:"token_file"`
	} `json:"server"`
	Scheduler struct {
		ShutdownGrace string `json:"shutdown_grace"`
	} `json:"scheduler"`
}

var dayWeek = regexp.MustCompile(`(\d+(?:\.\d+)?)([dw])`)

// parseDuration parses the config's durations: Go durations that may use d
// and w.
func parseDuration(s string) (time.Duration, error) {
	s = dayWeek.ReplaceAllStringFunc(s, func(m string) string {
		sub := dayWeek.FindStringSubmatch(m)
		n, _ := strconv.ParseFloat(sub[1], 64)
		if sub[2] == "w" {
			n *= 7
		}
		return strconv.FormatFloat(n*24, 'f', -1, 64) + "h"
	})
	return time.ParseDuration(s)
}

// flagValue returns the value of a flag given as "--flag value" or
// "--flag=value".
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// checkMaintainer checks a maintainer container: its command, mounts,
// probes, and its config against the pod (and collects the config for the
// binary to validate).
func checkMaintainer(b *build, p *pod, c *corev1.Container, init, sidecar bool, volumes map[string]corev1.Volume, r *result) {
	where := fmt.Sprintf("%s: container %q", p.owner.source, c.Name)
	if len(c.Command) > 0 {
		r.problem("%s: command overrides the image's ENTRYPOINT /maintainer; pass args only", where)
	}
	if len(c.Args) == 0 {
		r.problem("%s: no args (serve or run)", where)
		return
	}
	cmd := c.Args[0]
	cfgPath := flagValue(c.Args, "--config")
	if cfgPath == "" || !path.IsAbs(cfgPath) {
		r.problem("%s: args must give --config with an absolute path (got %v)", where, c.Args)
		return
	}
	kind := p.owner.kind
	switch cmd {
	case "serve":
		switch {
		case kind == "Deployment" || kind == "StatefulSet":
			if init {
				r.problem("%s: serve in a %s must be a regular container", where, kind)
			}
		case !sidecar:
			r.problem("%s: in a %s, serve must run as a native sidecar: an initContainer with restartPolicy: Always", where, kind)
		}
		if pt := containerPort(c, "http"); pt != httpPort {
			r.problem("%s: serve needs containerPort %d named http (got %d)", where, httpPort, pt)
		}
		checkHTTPProbe(where, "startupProbe", c.StartupProbe, "/healthz", r)
		checkHTTPProbe(where, "livenessProbe", c.LivenessProbe, "/healthz", r)
		checkHTTPProbe(where, "readinessProbe", c.ReadinessProbe, "/readyz", r)
	case "run":
		if kind != "CronJob" && kind != "Job" {
			r.problem("%s: run is one pass: it belongs in a CronJob or Job, not a %s", where, kind)
		}
		if init {
			r.problem("%s: run must be a regular container", where)
		}
		if flagValue(c.Args, "--output") != "json" {
			r.problem("%s: run should report with --output json (got %v)", where, c.Args)
		}
	default:
		r.problem("%s: args[0] must be serve or run (got %q)", where, cmd)
		return
	}

	cc := &configCase{
		source:     where,
		command:    cmd,
		configPath: cfgPath,
		files:      map[string]string{},
		env:        map[string]string{},
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			cc.env[e.Name] = e.Value
		}
	}
	hasTmp := false
	for _, m := range c.VolumeMounts {
		v := volumes[m.Name]
		cc.mountPaths = append(cc.mountPaths, m.MountPath)
		switch {
		case v.EmptyDir != nil:
			cc.dirs = append(cc.dirs, m.MountPath)
			if m.MountPath == "/tmp" {
				hasTmp = true
			}
		case v.ConfigMap != nil:
			cm, _ := objectOf[*corev1.ConfigMap](b, "ConfigMap", v.ConfigMap.Name)
			if cm == nil {
				continue
			}
			for k, val := range projected(cm.Data, v.ConfigMap.Items) {
				cc.files[path.Join(m.MountPath, k)] = val
			}
		case v.Secret != nil:
			keys := secretKeys(b, v.Secret.SecretName, r)
			for k := range projected(keys, v.Secret.Items) {
				cc.files[path.Join(m.MountPath, k)] = "placeholder-" + path.Base(k)
			}
		}
	}
	if !hasTmp {
		r.problem("%s: needs an emptyDir at /tmp (the root file system is read-only)", where)
	}
	text, ok := cc.files[cfgPath]
	if !ok {
		r.problem("%s: --config %s is not a file of a mounted ConfigMap", where, cfgPath)
		return
	}
	var cfg maintainerConfig
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		r.problem("%s: %s: %v", where, cfgPath, err)
		return
	}
	grace := 60 * time.Second // the maintainer's default
	if cfg.Scheduler.ShutdownGrace != "" {
		g, err := parseDuration(cfg.Scheduler.ShutdownGrace)
		if err != nil {
			r.problem("%s: scheduler.shutdown_grace: %v", where, err)
		}
		grace = g
	}
	tgps := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.spec.TerminationGracePeriodSeconds != nil {
		tgps = *p.spec.TerminationGracePeriodSeconds
	}
	if time.Duration(tgps)*time.Second <= grace {
		r.problem("%s: terminationGracePeriodSeconds %d must exceed scheduler.shutdown_grace %s (SIGTERM lets running tasks finish within it)", where, tgps, grace)
	}
	if cmd == "serve" {
		listen := cfg.Server.Listen
		if listen == "" {
			listen = ":8080"
		}
		host, port, err := net.SplitHostPort(listen)
		switch {
		case err != nil:
			r.problem("%s: server.listen %q: %v", where, listen, err)
		case port != strconv.Itoa(httpPort):
			r.problem("%s: server.listen %q is not on the http port %d", where, listen, httpPort)
		case host != "" && host != "0.0.0.0" && host != "::":
			r.problem("%s: server.listen %q: kubelet probes connect to the pod IP, so serve must listen on all addresses", where, listen)
		}
	}
	if d, ok := p.owner.typed.(*appsv1.Deployment); ok && (d.Spec.Replicas == nil || *d.Spec.Replicas > 1) && cfg.Lock.Backend != "redis" {
		r.problem("%s: several replicas need lock.backend redis (got %q)", where, cfg.Lock.Backend)
	}
	r.configs = append(r.configs, cc)
}

func containerPort(c *corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func checkHTTPProbe(where, kind string, p *corev1.Probe, wantPath string, r *result) {
	if p == nil {
		r.problem("%s: no %s", where, kind)
		return
	}
	h := p.HTTPGet
	if h == nil {
		r.problem("%s: %s must be an httpGet of %s", where, kind, wantPath)
		return
	}
	if h.Path != wantPath {
		r.problem("%s: %s must GET %s (got %q)", where, kind, wantPath, h.Path)
	}
	if h.Port.String() != "http" {
		r.problem("%s: %s must use the port named http (got %s)", where, kind, h.Port.String())
	}
}

// objectOf finds a typed object of the build.
func objectOf[T any](b *build, kind, name string) (T, bool) {
	var zero T
	o := b.find(kind, name)
	if o == nil {
		return zero, false
	}
	v, ok := o.typed.(T)
	return v, ok
}

// projected applies a volume's items to the keys of a ConfigMap or Secret.
func projected[V any](data map[string]V, items []corev1.KeyToPath) map[string]V {
	if len(items) == 0 {
		return data
	}
	out := map[string]V{}
	for _, it := range items {
		if v, ok := data[it.Key]; ok {
			out[it.Path] = v
		}
	}
	return out
}

// secretKeys returns the keys of the Secret name: rendered in the build, or
// documented in base/secret.example.yaml (nil when neither).
func secretKeys(b *build, name string, r *result) map[string]string {
	var s *corev1.Secret
	if v, ok := objectOf[*corev1.Secret](b, "Secret", name); ok {
		s = v
	} else {
		for _, o := range r.standalone {
			if v, ok := o.typed.(*corev1.Secret); ok && v.Name == name && strings.HasSuffix(o.source, "secret.example.yaml: Secret/"+name) {
				s = v
			}
		}
	}
	if s == nil {
		return nil
	}
	keys := map[string]string{}
	for k := range s.Data {
		keys[k] = ""
	}
	for k := range s.StringData {
		keys[k] = ""
	}
	return keys
}

func checkCronJob(o *object, cj *batchv1.CronJob, r *result) {
	s := cj.Spec
	if s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		r.problem("%s: concurrencyPolicy must be Forbid (got %q)", o.source, s.ConcurrencyPolicy)
	}
	if s.StartingDeadlineSeconds == nil || *s.StartingDeadlineSeconds <= 0 {
		r.problem("%s: startingDeadlineSeconds must be set", o.source)
	}
	if s.SuccessfulJobsHistoryLimit == nil || s.FailedJobsHistoryLimit == nil {
		r.problem("%s: successfulJobsHistoryLimit and failedJobsHistoryLimit must be set", o.source)
	}
	if strings.TrimSpace(s.Schedule) == "" || len(strings.Fields(s.Schedule)) != 5 {
		r.problem("%s: schedule %q is not a 5-field cron expression", o.source, s.Schedule)
	}
	checkJob(o, &s.JobTemplate.Spec, r)
	js := s.JobTemplate.Spec
	if js.ActiveDeadlineSeconds == nil || *js.ActiveDeadlineSeconds <= 0 {
		r.problem("%s: activeDeadlineSeconds must be set", o.source)
	}
	var name string
	for _, c := range js.Template.Spec.Containers {
		if isMaintainer(&c) {
			name = c.Name
		}
	}
	if name == "" {
		r.problem("%s: no maintainer container", o.source)
		return
	}
	if js.PodFailurePolicy == nil {
		r.problem("%s: podFailurePolicy must map the exit codes of maintainer run (1, 2 -> FailJob; 3 -> Count)", o.source)
		return
	}
	// The first rule that matches decides, as in the Job controller.
	want := map[int32]batchv1.PodFailurePolicyAction{1: batchv1.PodFailurePolicyActionFailJob, 2: batchv1.PodFailurePolicyActionFailJob, 3: batchv1.PodFailurePolicyActionCount}
	for code, action := range want {
		var got batchv1.PodFailurePolicyAction
		for _, rule := range js.PodFailurePolicy.Rules {
			ec := rule.OnExitCodes
			if ec == nil || (ec.ContainerName != nil && *ec.ContainerName != name) {
				continue
			}
			in := slices.Contains(ec.Values, code)
			if (ec.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == in {
				got = rule.Action
				break
			}
		}
		if got != action {
			r.problem("%s: exit code %d must map to %s in podFailurePolicy (got %q)", o.source, code, action, got)
		}
	}
}

// checkJob applies the API server's rules for a Job's pod failure policy,
// which strict decoding cannot see.
func checkJob(o *object, js *batchv1.JobSpec, r *result) {
	spec := js.Template.Spec
	if spec.RestartPolicy != corev1.RestartPolicyNever && spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		r.problem("%s: a Job's restartPolicy must be Never or OnFailure (got %q)", o.source, spec.RestartPolicy)
	}
	if js.BackoffLimit == nil {
		r.problem("%s: backoffLimit must be set", o.source)
	}
	if o.kind == "Job" {
		sidecar := false
		for _, c := range spec.InitContainers {
			if isMaintainer(&c) && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				sidecar = true
				if c.StartupProbe == nil || c.ReadinessProbe == nil {
					r.problem("%s: the maintainer sidecar needs a startupProbe and a readinessProbe", o.source)
				}
			}
		}
		if !sidecar {
			r.problem("%s: the maintainer must run as a native sidecar: an initContainer with restartPolicy: Always", o.source)
		}
		// serve as a regular container of a Job is reported by checkMaintainer.
	}
	pfp := js.PodFailurePolicy
	if pfp == nil {
		return
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		r.problem("%s: podFailurePolicy needs restartPolicy Never", o.source)
	}
	names := map[string]bool{}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		names[c.Name] = true
	}
	for i, rule := range pfp.Rules {
		where := fmt.Sprintf("%s: podFailurePolicy.rules[%d]", o.source, i)
		switch rule.Action {
		case batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyActionFailIndex:
		default:
			r.problem("%s: unknown action %q", where, rule.Action)
		}
		if (rule.OnExitCodes == nil) == (len(rule.OnPodConditions) == 0) {
			r.problem("%s: exactly one of onExitCodes and onPodConditions must be set", where)
		}
		if ec := rule.OnExitCodes; ec != nil {
			if ec.Operator != batchv1.PodFailurePolicyOnExitCodesOpIn && ec.Operator != batchv1.PodFailurePolicyOnExitCodesOpNotIn {
				r.problem("%s: operator must be In or NotIn (got %q)", where, ec.Operator)
			}
			if ec.ContainerName != nil && !names[*ec.ContainerName] {
				r.problem("%s: containerName %q names no container", where, *ec.ContainerName)
			}
			if len(ec.Values) == 0 || len(ec.Values) > 255 {
				r.problem("%s: values must hold 1 to 255 exit codes", where)
			}
			for j, v := range ec.Values {
				if j > 0 && v <= ec.Values[j-1] {
					r.problem("%s: values must be sorted and unique (got %v)", where, ec.Values)
					break
				}
				if v == 0 && ec.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn {
					r.problem("%s: exit code 0 is not a failure", where)
				}
			}
		}
	}
}

func checkService(b *build, o *object, s *corev1.Service, r *result) {
	if len(s.Spec.Selector) == 0 {
		r.problem("%s: no selector", o.source)
	} else if !selectsPod(b, metav1.LabelSelector{MatchLabels: s.Spec.Selector}) {
		r.problem("%s: selector %v matches no pod template of the build", o.source, s.Spec.Selector)
	}
	for _, p := range s.Spec.Ports {
		if errs := validation.IsValidPortName(p.Name); p.Name != "" && len(errs) > 0 {
			r.problem("%s: port name %q: %s", o.source, p.Name, strings.Join(errs, "; "))
		}
	}
	if o.name == "iceberg-maintainer" {
		ok := false
		for _, p := range s.Spec.Ports {
			if p.Name == "http" && p.Port == httpPort && p.TargetPort.String() == "http" {
				ok = true
			}
		}
		if !ok {
			r.problem("%s: needs port %d named http with targetPort http", o.source, httpPort)
		}
	}
}

func checkServiceMonitor(b *build, o *object, sm *monv1.ServiceMonitor, r *result) {
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil || sel.Empty() {
		r.problem("%s: selector must select the maintainer's Service (%v)", o.source, err)
		return
	}
	found := false
	for _, x := range b.objs {
		if s, ok := x.typed.(*corev1.Service); ok && sel.Matches(labels.Set(s.Labels)) {
			found = true
		}
	}
	if !found {
		r.problem("%s: selector %s matches no Service's labels in the build", o.source, sel)
	}
	if len(sm.Spec.Endpoints) == 0 {
		r.problem("%s: no endpoints", o.source)
	}
	for _, e := range sm.Spec.Endpoints {
		if e.Port != "http" || (e.Path != "" && e.Path != "/metrics") {
			r.problem("%s: endpoint must scrape port http path /metrics (got %q %q)", o.source, e.Port, e.Path)
		}
	}
}

func checkPodMonitor(b *build, o *object, pm *monv1.PodMonitor, r *result) {
	if !selectsPod(b, pm.Spec.Selector) {
		r.problem("%s: selector matches no pod template of the build", o.source)
	}
	for _, e := range pm.Spec.PodMetricsEndpoints {
		if e.Port == nil || *e.Port != "http" || (e.Path != "" && e.Path != "/metrics") {
			r.problem("%s: endpoint must scrape port http path /metrics", o.source)
		}
	}
}

func checkPDB(b *build, o *object, pdb *policyv1.PodDisruptionBudget, r *result) {
	if pdb.Spec.Selector == nil || !selectsPod(b, *pdb.Spec.Selector) {
		r.problem("%s: selector matches no pod template of the build", o.source)
	}
	if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
		r.problem("%s: exactly one of minAvailable and maxUnavailable must be set", o.source)
	}
}
