package prepare

import (
	"context"
	"encoding/json"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// DeviceStatusData is written into ResourceClaim.status.devices[].data.
type DeviceStatusData struct {
	UUID        string `json:"uuid"`
	ProductName string `json:"productName,omitempty"`
}

// AsyncStatusWriter writes device status with server-side apply from a
// background worker, keeping the API round trip off the prepare path: the
// kubelet does not need it to start the container.
type AsyncStatusWriter struct {
	client     kubernetes.Interface
	driverName string
	jobs       chan statusJob
	// Retries bounds attempts per update.
	Retries int
	// Done is closed when the worker stops (for tests).
	Done chan struct{}
}

type statusJob struct {
	namespace, name string
	uid             types.UID
	devices         []checkpoint.PreparedDevice
}

// NewAsyncStatusWriter starts the worker; it stops when ctx ends.
func NewAsyncStatusWriter(ctx context.Context, client kubernetes.Interface, driverName string) *AsyncStatusWriter {
	w := &AsyncStatusWriter{client: client, driverName: driverName, jobs: make(chan statusJob, 1024), Retries: 5, Done: make(chan struct{})}
	go w.run(ctx)
	return w
}

// Prepared implements StatusReporter.
func (w *AsyncStatusWriter) Prepared(claim *resourceapi.ResourceClaim, devices []checkpoint.PreparedDevice) {
	w.enqueue(statusJob{namespace: claim.Namespace, name: claim.Name, uid: claim.UID, devices: devices})
}

func (w *AsyncStatusWriter) enqueue(j statusJob) {
	select {
	case w.jobs <- j:
	default:
		// The status is informational; never block prepare on it.
		klog.Background().Info("Device status queue full, dropping update", "claim", klog.KRef(j.namespace, j.name))
	}
}

func (w *AsyncStatusWriter) run(ctx context.Context) {
	defer close(w.Done)
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-w.jobs:
			w.apply(ctx, j)
		}
	}
}

func (w *AsyncStatusWriter) apply(ctx context.Context, j statusJob) {
	logger := klog.FromContext(ctx)
	status := resourceac.ResourceClaimStatus()
	for _, d := range j.devices {
		data, _ := json.Marshal(DeviceStatusData{UUID: d.UUID, ProductName: d.ProductName})
		status.WithDevices(resourceac.AllocatedDeviceStatus().
			WithDriver(w.driverName).WithPool(d.Pool).WithDevice(d.Device).
			WithData(runtime.RawExtension{Raw: data}))
	}
	ac := resourceac.ResourceClaim(j.name, j.namespace).WithUID(j.uid).WithStatus(status)
	backoff := 50 * time.Millisecond
	for attempt := 1; attempt <= w.Retries; attempt++ {
		_, err := w.client.ResourceV1().ResourceClaims(j.namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: w.driverName, Force: true})
		if err == nil {
			return
		}
		logger.V(3).Info("Writing device status failed", "claim", klog.KRef(j.namespace, j.name), "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
			backoff *= 2
		}
	}
}
