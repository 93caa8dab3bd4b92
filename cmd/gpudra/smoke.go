package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"sigs.k8s.io/yaml"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
	pubslices "github.com/gpu-dra-driver/gpu-dra-driver/pkg/slices"
)

// The smoke checks print one line per check, "PASS|FAIL|SKIP<TAB>check<TAB>detail",
// which hack/gpu-smoke.sh gathers into its table.

type result struct {
	status, check, detail string
}

type report struct {
	out     io.Writer
	results []result
}

func (r *report) add(status, check, format string, args ...any) {
	res := result{status, check, strings.ReplaceAll(fmt.Sprintf(format, args...), "\n", " ")}
	r.results = append(r.results, res)
	fmt.Fprintf(r.out, "%s\t%s\t%s\n", res.status, res.check, res.detail)
}
func (r *report) pass(check, f string, a ...any) { r.add("PASS", check, f, a...) }
func (r *report) fail(check, f string, a ...any) { r.add("FAIL", check, f, a...) }
func (r *report) skip(check, f string, a ...any) { r.add("SKIP", check, f, a...) }
func (r *report) check(ok bool, check, f string, a ...any) {
	if ok {
		r.pass(check, f, a...)
	} else {
		r.fail(check, f, a...)
	}
}

var errFailed = errors.New("some checks failed")

func (r *report) err() error {
	for _, res := range r.results {
		if res.status == "FAIL" {
			return errFailed
		}
	}
	return nil
}

func newSmokeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "smoke",
		Short: "Read-only checks of a GPU host without a cluster (make gpu-smoke runs them)",
	}
	cmd.AddCommand(newSmokeCompareCommand(), newSmokePrepareCommand())
	return cmd
}

// ---- compare: what --print-slices published against nvidia-smi ----

func newSmokeCompareCommand() *cobra.Command {
	var slicesFile, gpusFile, lgipFile string
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Compare the plugin's --print-slices output with nvidia-smi's view of the GPUs",
		Long: `--gpus is the output of
  nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id,driver_version --format=csv,noheader,nounits
and --mig-profiles, optional, that of "nvidia-smi mig -lgip".`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := &report{out: cmd.OutOrStdout()}
			smokeCompare(r, slicesFile, gpusFile, lgipFile)
			return r.err()
		},
	}
	cmd.Flags().StringVar(&slicesFile, "slices", "", "ResourceSlices YAML from gpu-kubelet-plugin --print-slices")
	cmd.Flags().StringVar(&gpusFile, "gpus", "", "nvidia-smi --query-gpu CSV")
	cmd.Flags().StringVar(&lgipFile, "mig-profiles", "", "nvidia-smi mig -lgip output")
	return cmd
}

// smiGPU is one line of nvidia-smi --query-gpu.
type smiGPU struct {
	index                     int
	uuid, name, busID, driver string
	memoryMiB                 int64
}

func readSmiGPUs(path string) ([]smiGPU, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd := csv.NewReader(f)
	rd.TrimLeadingSpace = true
	rows, err := rd.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []smiGPU
	for _, row := range rows {
		if len(row) != 6 {
			return nil, fmt.Errorf("%s: %d fields in %q, want index,uuid,name,memory.total,pci.bus_id,driver_version", path, len(row), row)
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(row[0]))
		mem, err2 := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(row[3], "MiB")), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad index or memory in %q", path, row)
		}
		out = append(out, smiGPU{index: idx, uuid: strings.TrimSpace(row[1]), name: strings.TrimSpace(row[2]), memoryMiB: mem, busID: strings.TrimSpace(row[4]), driver: strings.TrimSpace(row[5])})
	}
	return out, nil
}

func readSlices(path string) ([]resourceapi.ResourceSlice, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []resourceapi.ResourceSlice
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var s resourceapi.ResourceSlice
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func attrString(d resourceapi.Device, name string) string {
	a, ok := d.Attributes[resourceapi.QualifiedName(name)]
	switch {
	case !ok:
		return ""
	case a.StringValue != nil:
		return *a.StringValue
	case a.VersionValue != nil:
		return *a.VersionValue
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue)
	}
	return ""
}

// normBusID writes a PCI bus ID as the plugin does: 4-digit domain, lower case.
func normBusID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	if dom, rest, ok := strings.Cut(id, ":"); ok && len(dom) > 4 {
		id = dom[len(dom)-4:] + ":" + rest
	}
	return id
}

// sameVersion compares dotted versions numerically: 535.104.05 = 535.104.5.
func sameVersion(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		x, err1 := strconv.Atoi(pa[i])
		y, err2 := strconv.Atoi(pb[i])
		if err1 != nil || err2 != nil || x != y {
			return false
		}
	}
	return true
}

func short(uuid string) string {
	if len(uuid) > 12 {
		return uuid[:12]
	}
	return uuid
}

func smokeCompare(r *report, slicesFile, gpusFile, lgipFile string) {
	gpus, err := readSmiGPUs(gpusFile)
	if err != nil {
		r.fail("nvidia-smi --query-gpu", "%v", err)
		return
	}
	published, err := readSlices(slicesFile)
	if err != nil {
		r.fail("--print-slices output", "%v", err)
		return
	}
	byUUID := map[string]resourceapi.Device{}
	migProfiles := map[string][]string{} // parent UUID -> published MIG profiles
	counters := map[string][]string{}    // counter set -> counter names
	for _, s := range published {
		for _, cs := range s.Spec.SharedCounters {
			for name := range cs.Counters {
				counters[cs.Name] = append(counters[cs.Name], name)
			}
		}
		for _, d := range s.Spec.Devices {
			switch attrString(d, "type") {
			case "gpu":
				byUUID[attrString(d, "uuid")] = d
			case "mig":
				p := attrString(d, "parentUUID")
				if prof := attrString(d, "profile"); !slices.Contains(migProfiles[p], prof) {
					migProfiles[p] = append(migProfiles[p], prof)
				}
			}
		}
	}
	r.check(len(gpus) > 0, "GPUs", "nvidia-smi reports %d, the plugin publishes %d", len(gpus), len(byUUID))
	seen := map[string]bool{}
	for _, g := range gpus {
		seen[g.uuid] = true
		id := fmt.Sprintf("GPU %d", g.index)
		d, ok := byUUID[g.uuid]
		if !ok {
			r.fail(id+" published", "%s is not in the plugin's slices", g.uuid)
			continue
		}
		r.pass(id+" uuid", "%s as %s", g.uuid, d.Name)
		r.check(attrString(d, "productName") == g.name, id+" name", "published %q, nvidia-smi %q", attrString(d, "productName"), g.name)
		var memMiB int64 = -1
		if q, ok := d.Capacity[resourceapi.QualifiedName(pubslices.CapMemory)]; ok {
			memMiB = q.Value.Value() >> 20
		}
		r.check(math.Abs(float64(memMiB-g.memoryMiB)) <= 1, id+" memory", "published %d MiB, nvidia-smi %d MiB", memMiB, g.memoryMiB)
		bus := attrString(d, "resource.kubernetes.io/pciBusID")
		r.check(bus != "" && bus == normBusID(g.busID), id+" PCI bus ID", "published %s, nvidia-smi %s", bus, g.busID)
		drv := attrString(d, "driverVersion")
		r.check(sameVersion(drv, g.driver), id+" driver version", "published %s, nvidia-smi %s", drv, g.driver)
	}
	for uuid, d := range byUUID {
		if !seen[uuid] {
			r.fail("GPU "+short(uuid), "published as %s but not reported by nvidia-smi", d.Name)
		}
	}
	compareMigProfiles(r, lgipFile, gpus, byUUID, migProfiles, counters)
}

// lgipRow matches a profile line of `nvidia-smi mig -lgip`:
// "|   0  MIG 1g.10gb          19     7/7        9.75       No     16     1     0   |".
var lgipRow = regexp.MustCompile(`^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+\d+/\d+\s`)

var profileCounter = regexp.MustCompile(`^profile-(\d+)-instances$`)

func compareMigProfiles(r *report, lgipFile string, gpus []smiGPU, byUUID map[string]resourceapi.Device, published map[string][]string, counters map[string][]string) {
	if lgipFile == "" {
		r.skip("MIG profiles", "no nvidia-smi mig -lgip output given")
		return
	}
	data, err := os.ReadFile(lgipFile)
	if err != nil {
		r.skip("MIG profiles", "%v", err)
		return
	}
	names := map[int]map[string]string{} // GPU index -> profile name -> ID
	for _, line := range strings.Split(string(data), "\n") {
		m := lgipRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		idx, _ := strconv.Atoi(m[1])
		if names[idx] == nil {
			names[idx] = map[string]string{}
		}
		names[idx][m[2]] = m[3]
	}
	if len(names) == 0 {
		first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(string(data)), "\n", 2)[0])
		r.skip("MIG profiles", "nvidia-smi mig -lgip lists none (%s); it answers only for GPUs in MIG mode, which this test never changes", first)
		return
	}
	for _, g := range gpus {
		lgip, ok := names[g.index]
		id := fmt.Sprintf("GPU %d", g.index)
		if !ok {
			continue
		}
		var unknown []string
		for _, p := range published[g.uuid] {
			if _, ok := lgip[p]; !ok {
				unknown = append(unknown, p)
			}
		}
		sort.Strings(unknown)
		r.check(len(unknown) == 0, id+" MIG profile names", "%d published, all in nvidia-smi mig -lgip (%d profiles); unknown: %v", len(published[g.uuid]), len(lgip), unknown)

		ids := map[string]bool{}
		for _, v := range lgip {
			ids[v] = true
		}
		var used, bad []string
		for _, cs := range byUUID[g.uuid].ConsumesCounters {
			for _, c := range counters[cs.CounterSet] {
				if m := profileCounter.FindStringSubmatch(c); m != nil {
					used = append(used, m[1])
					if !ids[m[1]] {
						bad = append(bad, c)
					}
				}
			}
		}
		if len(used) == 0 {
			r.skip(id+" MIG profile IDs", "no profile ID published for this GPU (only instance-capped profiles carry one)")
			continue
		}
		sort.Strings(bad)
		r.check(len(bad) == 0, id+" MIG profile IDs", "published IDs %v; not in nvidia-smi mig -lgip: %v", used, bad)
	}
}

// ---- prepare: one whole GPU through the plugin, real nvcdi ----

const smokeNode = "gpu-smoke"

type smokeOptions struct {
	driverRoot, nvmlLibrary, hook, gpu string
	timeout                            time.Duration
	// simulate, for testing this command without a GPU: simulated NVML,
	// but the real driver backend (nvcdi under driverRoot).
	simulate string
}

func newSmokePrepareCommand() *cobra.Command {
	o := smokeOptions{}
	cmd := &cobra.Command{
		Use:   "prepare",
		Short: "Prepare and unprepare one whole GPU through the plugin (in-process API, real NVML and nvcdi); changes no GPU setting",
		Long: `Starts the kubelet plugin in this process against an in-process API server
stand-in, on temporary state, CDI and socket directories, with dynamic MIG off.
Every NVML call that would change a GPU (MIG mode, MIG instances, compute or
persistence mode, clocks, ...) and every time-slice or MPS change is refused
and reported. It prepares one whole-GPU claim over the kubelet gRPC API,
checks the CDI spec (every device node, mount source and hook exists, the
hook knows every subcommand the spec uses, the CDI library applies it) and
unprepares it.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := &report{out: cmd.OutOrStdout()}
			smokePrepare(cmd.Context(), r, o)
			return r.err()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.driverRoot, "driver-root", "/", "Root of the NVIDIA driver installation.")
	f.StringVar(&o.nvmlLibrary, "nvml-library", "", "Explicit libnvidia-ml.so.1; searched under --driver-root when empty.")
	f.StringVar(&o.hook, "hook", "bin/nvidia-cdi-hook", "nvidia-cdi-hook to install and name in the spec (make build).")
	f.StringVar(&o.gpu, "gpu", "", "UUID or index of the GPU to prepare; default the first whole GPU published.")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "Give up after this long.")
	f.StringVar(&o.simulate, "simulate", "", "Testing only: simulated NVML (e.g. h100x2) with the real driver backend under --driver-root.")
	_ = f.MarkHidden("simulate")
	return cmd
}

// refusingTools stand in for nvidia-smi compute-policy and MPS daemons.
type refusingTools struct{ r *refusals }

func (t refusingTools) SetTimeSlice(string, configapi.TimeSliceInterval) error {
	t.r.refuse("SetTimeSlice")
	return fmt.Errorf("the smoke test changes no time slice")
}
func (t refusingTools) Command(*sharing.Daemon) *exec.Cmd {
	t.r.refuse("StartMPSDaemon")
	return &exec.Cmd{Err: fmt.Errorf("the smoke test starts no MPS daemon")}
}
func (t refusingTools) Configure(*sharing.Daemon, sharing.Settings) error {
	t.r.refuse("ConfigureMPSDaemon")
	return fmt.Errorf("the smoke test configures no MPS daemon")
}

func smokePrepare(ctx context.Context, r *report, o smokeOptions) {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	root, err := os.MkdirTemp("", "gpudra-smoke-")
	if err != nil {
		r.fail("work directory", "%v", err)
		return
	}
	defer os.RemoveAll(root)
	dir := func(n string) string { return filepath.Join(root, n) }

	var lib nvml.Interface
	sysfs := "/sys"
	if o.simulate != "" {
		profile, err := simulate.ParseProfile(o.simulate)
		if err != nil {
			r.fail("simulated NVML", "%v", err)
			return
		}
		sim, err := simulate.New(profile, smokeNode, dir("simulated"))
		if err != nil {
			r.fail("simulated NVML", "%v", err)
			return
		}
		for _, d := range sim.Devices {
			// nvcdi asks every GPU handle whether it is a MIG device.
			if sd, ok := d.(*server.Device); ok && sd.IsMigDeviceHandleFunc == nil {
				sd.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
			}
		}
		lib, sysfs = sim, sim.SysfsRoot()
	} else {
		if lib, err = nvdev.OpenNVML(o.driverRoot, o.nvmlLibrary); err != nil {
			r.fail("NVML", "%v", err)
			return
		}
		defer lib.Shutdown()
	}
	ro, refused := newReadOnlyNVML(lib)
	hook, err := filepath.Abs(o.hook)
	if err != nil {
		r.fail("nvidia-cdi-hook", "%v", err)
		return
	}
	backend, err := driver.NewBackend(ro, driver.BackendOptions{
		NodeName: smokeNode, StateDir: dir("state"), DriverRoot: o.driverRoot, SysfsRoot: sysfs,
		HookInstallDir: dir("hook-bin"), HookSource: hook,
	})
	if err != nil {
		r.fail("driver backend", "%v", err)
		return
	}
	tools := refusingTools{refused}
	backend.TimeSlicer, backend.MPSLauncher = tools, tools
	r.pass("NVML discovery", "%d GPUs, driver %s", len(backend.Inventory.GPUs), backend.Inventory.DriverVersion)

	client := fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: smokeNode}})
	d, err := driver.Start(ctx, driver.Config{DriverName: driverName, NodeName: smokeNode, Client: client, Backend: backend,
		StateDir: dir("state"), CDIDir: dir("cdi"), PluginDir: dir("plugin"), RegistrarDir: dir("registry"), DynamicMIG: false})
	if err != nil {
		r.fail("plugin start", "%v", err)
		return
	}
	defer d.Stop()
	published, err := waitForSlices(ctx, client)
	if err != nil {
		r.fail("plugin start", "%v", err)
		return
	}
	dev, err := pickGPU(published, o.gpu)
	if err != nil {
		r.fail("plugin start", "%v", err)
		return
	}
	r.pass("plugin start", "%d ResourceSlices published; preparing %s (%s)", len(published), dev.Name, attrString(*dev, "uuid"))

	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-smoke", Namespace: "default", UID: types.UID("6a1b0c8e-5302-4d5e-9f3a-0000000000a1")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: driverName, Pool: smokeNode, Device: dev.Name}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		r.fail("prepare", "%v", err)
		return
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir("plugin"), "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.fail("prepare", "%v", err)
		return
	}
	defer conn.Close()
	kubelet := drapb.NewDRAPluginClient(conn)
	req := &drapb.Claim{Namespace: "default", Name: claim.Name, Uid: string(claim.UID)}
	resp, err := kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{req}})
	if err == nil && resp.Claims[req.Uid].GetError() != "" {
		err = errors.New(resp.Claims[req.Uid].GetError())
	}
	if err != nil {
		r.fail("prepare", "%v", err)
	} else {
		var ids []string
		for _, d := range resp.Claims[req.Uid].GetDevices() {
			ids = append(ids, d.CdiDeviceIds...)
		}
		r.pass("prepare", "CDI devices %v", ids)
		checkSpec(r, dir("cdi"), ids, filepath.Join(dir("hook-bin"), "nvidia-cdi-hook"))
	}

	uresp, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{req}})
	if err == nil && uresp.Claims[req.Uid].GetError() != "" {
		err = errors.New(uresp.Claims[req.Uid].GetError())
	}
	left, _ := filepath.Glob(filepath.Join(dir("cdi"), "*.json"))
	records, _ := filepath.Glob(filepath.Join(dir("state"), "checkpoint", "*.json"))
	r.check(err == nil && len(left)+len(records) == 0, "unprepare", "error %v; left behind: %d CDI specs, %d checkpoint records", err, len(left), len(records))

	calls := refused.List()
	r.check(len(calls) == 0, "no GPU setting changed", "refused attempts: %v", calls)
}

func pickGPU(published []*resourceapi.ResourceSlice, want string) (*resourceapi.Device, error) {
	var all []string
	for _, s := range published {
		for i, d := range s.Spec.Devices {
			if attrString(d, "type") != "gpu" {
				continue
			}
			all = append(all, attrString(d, "uuid"))
			if want == "" || want == attrString(d, "uuid") || want == attrString(d, "index") {
				return &s.Spec.Devices[i], nil
			}
		}
	}
	if want == "" {
		return nil, fmt.Errorf("no whole GPU published (a GPU in MIG mode is published as its MIG devices)")
	}
	return nil, fmt.Errorf("GPU %q is not published as a whole GPU; published: %v", want, all)
}

// checkSpec checks the claim's CDI spec as a container runtime would meet
// it on this host.
func checkSpec(r *report, cdiDir string, ids []string, installedHook string) {
	files, _ := filepath.Glob(filepath.Join(cdiDir, "*.json"))
	if len(files) != 1 {
		r.fail("CDI spec", "%d spec files in %s, want 1", len(files), cdiDir)
		return
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		r.fail("CDI spec", "%v", err)
		return
	}
	spec, err := cdiapi.ParseSpec(data)
	if err != nil {
		r.fail("CDI spec", "%v", err)
		return
	}
	all := []cdispec.ContainerEdits{spec.ContainerEdits}
	for _, d := range spec.Devices {
		all = append(all, d.ContainerEdits)
	}
	var nodes, missingNodes, mounts, missingMounts int
	var missing []string
	hooks := map[string][]string{} // hook path -> subcommands
	for _, e := range all {
		for _, n := range e.DeviceNodes {
			nodes++
			if n.Type == "c" && n.Major > 0 {
				continue // created by the runtime (MIG caps)
			}
			host := n.HostPath
			if host == "" {
				host = n.Path
			}
			if st, err := os.Stat(host); err != nil || st.Mode()&os.ModeCharDevice == 0 {
				missingNodes++
				missing = append(missing, host)
			}
		}
		for _, m := range e.Mounts {
			mounts++
			if _, err := os.Stat(m.HostPath); err != nil {
				missingMounts++
				missing = append(missing, m.HostPath)
			}
		}
		for _, h := range e.Hooks {
			sub := ""
			if len(h.Args) > 1 {
				sub = h.Args[1]
			}
			if !slices.Contains(hooks[h.Path], sub) {
				hooks[h.Path] = append(hooks[h.Path], sub)
			}
		}
	}
	r.check(nodes > 0 && missingNodes == 0, "CDI device nodes exist", "%d device nodes, %d missing %v", nodes, missingNodes, missing)
	r.check(mounts > 0 && missingMounts == 0, "CDI mount sources exist", "%d mounts, %d missing", mounts, missingMounts)

	var paths []string
	for p := range hooks {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	r.check(len(paths) == 1 && paths[0] == installedHook, "CDI hooks name the installed hook", "hook paths %v, installed %s", paths, installedHook)
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&0o111 == 0 {
			r.fail("hook binary "+filepath.Base(p), "%s is not an executable: %v", p, err)
			continue
		}
		var unknown []string
		subs := hooks[p]
		sort.Strings(subs)
		for _, sub := range subs {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := exec.CommandContext(ctx, p, sub, "--help").CombinedOutput()
			cancel()
			if err != nil || sub == "" || strings.Contains(string(out), "Unsupported") || !strings.Contains(string(out), sub) {
				unknown = append(unknown, sub)
			}
		}
		r.check(len(unknown) == 0, "hook knows the spec's subcommands", "%s: %s; unknown: %v", p, strings.Join(subs, " "), unknown)
	}

	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cdiDir), cdiapi.WithAutoRefresh(false))
	if err == nil {
		oc := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
		_, err = cache.InjectDevices(oc, ids...)
		if err == nil {
			r.pass("CDI spec applies", "%d devices, %d mounts, %d hooks injected into an OCI spec", len(oc.Linux.Devices), len(oc.Mounts), countHooks(oc))
			return
		}
	}
	r.fail("CDI spec applies", "%v", err)
}

func countHooks(s *oci.Spec) int {
	if s.Hooks == nil {
		return 0
	}
	return len(s.Hooks.CreateRuntime) + len(s.Hooks.CreateContainer) + len(s.Hooks.StartContainer) + len(s.Hooks.Poststart) + len(s.Hooks.Poststop)
}
