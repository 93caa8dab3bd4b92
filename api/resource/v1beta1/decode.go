// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"
)

// Decode strictly decodes one opaque config object. The error names the
// offending field (unknown fields, wrong types, wrong apiVersion or kind)
// so that the user can fix the claim without reading driver logs.
func Decode(raw []byte) (Config, error) {
	var meta TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		if msg, ok := describeTypeError(err); ok {
			return nil, errors.New(msg)
		}
		return nil, fmt.Errorf("config is not a JSON object: %w", err)
	}
	if meta.APIVersion != GroupVersion {
		return nil, fmt.Errorf("apiVersion: got %q, want %q", meta.APIVersion, GroupVersion)
	}
	var cfg Config
	switch meta.Kind {
	case GpuConfigKind:
		cfg = &GpuConfig{}
	case MigDeviceConfigKind:
		cfg = &MigDeviceConfig{}
	default:
		return nil, fmt.Errorf("kind: unknown kind %q; use %s or %s", meta.Kind, GpuConfigKind, MigDeviceConfigKind)
	}
	// Quantity's own parse error names no field, so quantities are checked
	// before the decoder meets them.
	if err := checkQuantities(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(raw, cfg)
	if err != nil {
		if msg, ok := describeTypeError(err); ok {
			return nil, fmt.Errorf("%s: %s", meta.Kind, msg)
		}
		if isQuantityError(err) {
			// Only a duplicated key hides a quantity from checkQuantities.
			return nil, fmt.Errorf("%s: sharing.mpsConfig: invalid quantity: use a Kubernetes quantity such as 10Gi", meta.Kind)
		}
		return nil, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("%s: %s", meta.Kind, strings.Join(msgs, "; "))
	}
	return cfg, nil
}

// checkQuantities parses every quantity field the way the decoder will and
// names the field that does not parse. Sections of the wrong JSON type are
// skipped: the decoder reports those with their field.
func checkQuantities(raw []byte) error {
	const path = "sharing.mpsConfig"
	mps, ok := jsonObjectAt(raw, "sharing", "mpsConfig")
	if !ok {
		return nil
	}
	if v, ok := mps["defaultPinnedDeviceMemoryLimit"]; ok {
		if err := checkQuantity(path+".defaultPinnedDeviceMemoryLimit", v); err != nil {
			return err
		}
	}
	perDevice, ok := jsonObjectAt(mps["defaultPerDevicePinnedMemoryLimit"])
	if !ok {
		return nil
	}
	for _, key := range slices.Sorted(maps.Keys(perDevice)) {
		if err := checkQuantity(fmt.Sprintf("%s.defaultPerDevicePinnedMemoryLimit[%q]", path, key), perDevice[key]); err != nil {
			return err
		}
	}
	return nil
}

func checkQuantity(field string, raw json.RawMessage) error {
	var q resource.Quantity
	if err := q.UnmarshalJSON(raw); err != nil {
		shown := string(raw)
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return fmt.Errorf("%s: invalid quantity %s: use a Kubernetes quantity such as 10Gi", field, shown)
	}
	return nil
}

// jsonObjectAt returns the object at a path of keys, or false when a step
// is missing or not an object.
func jsonObjectAt(raw json.RawMessage, keys ...string) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, false
	}
	for _, k := range keys {
		if obj, _ = jsonObjectAt(obj[k]); obj == nil {
			return nil, false
		}
	}
	return obj, true
}

func isQuantityError(err error) bool {
	return errors.Is(err, resource.ErrFormatWrong) || errors.Is(err, resource.ErrNumeric) || errors.Is(err, resource.ErrSuffix)
}

// examples are shown in type errors of fields whose type alone says little.
var examples = map[string]string{
	"apiVersion":                         `"` + GroupVersion + `"`,
	"kind":                               `"` + GpuConfigKind + `"`,
	"sharing.strategy":                   `"` + string(MpsStrategy) + `"`,
	"sharing.timeSlicingConfig.interval": `"` + string(LongTimeSlice) + `"`,
	"sharing.mpsConfig.defaultActiveThreadPercentage":  "50",
	"sharing.mpsConfig.defaultPinnedDeviceMemoryLimit": `"10Gi"`,
}

// describeTypeError turns a JSON type error into "field: must be <what>,
// got <what>", without the Go type names the decoder puts in its message.
func describeTypeError(err error) (string, bool) {
	field, value, typ, ok := typeErrorFields(err)
	if !ok {
		return "", false
	}
	// The decoder names the inlined TypeMeta struct in the path; JSON has no
	// such level.
	field = strings.TrimPrefix(field, "TypeMeta.")
	if field == "" {
		return fmt.Sprintf("config: must be a JSON object, got %s", value), true
	}
	want := describeType(typ)
	if ex, ok := examples[field]; ok {
		want += " such as " + ex
	}
	return fmt.Sprintf("%s: must be %s, got %s", field, want, value), true
}

// typeErrorFields reads a JSON type error. encoding/json returns
// *json.UnmarshalTypeError; sigs.k8s.io/json returns its internal copy of
// that type, which cannot be named outside its module but has the same
// fields, so those are read by reflection.
func typeErrorFields(err error) (field, value string, typ reflect.Type, ok bool) {
	var std *json.UnmarshalTypeError
	if errors.As(err, &std) {
		return std.Field, std.Value, std.Type, true
	}
	v := reflect.ValueOf(err)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || v.Elem().Type().Name() != "UnmarshalTypeError" {
		return "", "", nil, false
	}
	f, val, t := v.Elem().FieldByName("Field"), v.Elem().FieldByName("Value"), v.Elem().FieldByName("Type")
	if f.Kind() != reflect.String || val.Kind() != reflect.String || !t.IsValid() || !t.CanInterface() {
		return "", "", nil, false
	}
	typ, ok = t.Interface().(reflect.Type)
	return f.String(), val.String(), typ, ok && typ != nil
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	default: // structs and maps
		return "an object"
	}
}
