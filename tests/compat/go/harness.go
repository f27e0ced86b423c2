// What every scenario shares: the namespace it talks to (from the environment go_runner.py sets), the
// broker's certificate as the one root TLS trusts, errors described the same way everywhere, and the one
// JSON document a scenario prints for pytest.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"
	"github.com/Azure/go-amqp"
)

// A document a scenario returns: printed as JSON on the last line of stdout.
type doc = map[string]any

func required(name string) string {
	value := os.Getenv(name)
	if value == "" {
		panic(fmt.Sprintf("%s is not set (tests/compat/go_runner.py sets it)", name))
	}
	return value
}

func connectionString() string      { return required("SB_CONNECTION_STRING") }
func adminConnectionString() string { return required("SB_ADMIN_CONNECTION_STRING") }

// The broker's self-signed certificate (SB_CERT_PATH) as the only root: verification stays on.
func trustingBroker() *tls.Config {
	pem, err := os.ReadFile(required("SB_CERT_PATH"))
	if err != nil {
		panic(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		panic("SB_CERT_PATH holds no PEM certificate")
	}
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// No client retries: each error shows at once and its time is the broker's.
var noRetry = azservicebus.RetryOptions{MaxRetries: -1}

func newClient(connection string, options *azservicebus.ClientOptions) *azservicebus.Client {
	if options == nil {
		options = &azservicebus.ClientOptions{RetryOptions: noRetry}
	}
	client, err := azservicebus.NewClientFromConnectionString(connection, options)
	must(err)
	return client
}

func newAdmin(connection string) *admin.Client {
	transport := &http.Client{Transport: &http.Transport{TLSClientConfig: trustingBroker()}, Timeout: 30 * time.Second}
	client, err := admin.NewClientFromConnectionString(connection, &admin.ClientOptions{
		ClientOptions: azcore.ClientOptions{Transport: transport, Retry: policy.RetryOptions{MaxRetries: -1}},
	})
	must(err)
	return client
}

func withKey(connection, key string) string {
	return regexp.MustCompile(`SharedAccessKey=[^;]*`).ReplaceAllString(connection, "SharedAccessKey="+key)
}

// The fields a test asserts on: the SDK's code (*azservicebus.Error), the AMQP condition underneath, the
// management status (RPC replies and the admin client's HTTP responses) and the text.
func describeError(err error) doc {
	if err == nil {
		return nil
	}
	described := doc{"message": err.Error(), "type": fmt.Sprintf("%T", err)}
	var sbErr *azservicebus.Error
	if errors.As(err, &sbErr) {
		described["code"] = string(sbErr.Code)
	}
	var amqpErr *amqp.Error
	if errors.As(err, &amqpErr) {
		described["condition"] = string(amqpErr.Condition)
		described["description"] = amqpErr.Description
	}
	var rpcErr interface{ RPCCode() int }
	if errors.As(err, &rpcErr) {
		described["statusCode"] = rpcErr.RPCCode()
	}
	var responseErr *azcore.ResponseError
	if errors.As(err, &responseErr) {
		described["statusCode"] = responseErr.StatusCode
		described["errorCode"] = responseErr.ErrorCode
	}
	return described
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func mustGet[T any](value T, err error) T {
	must(err)
	return value
}

// A context for one call: the broker answers within it or the call fails.
func within(seconds float64) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Duration(seconds*float64(time.Second)))
}

var background = context.Background()

// {"value": ...} or {"error": ...}, as the admin scenarios record each call.
func outcome[T any](value T, err error) doc {
	if err != nil {
		return doc{"error": describeError(err)}
	}
	return doc{"value": value}
}

// The description of what a call failed with, or nil; and how long it took.
func timed(operation func() error) doc {
	started := time.Now()
	err := operation()
	return doc{"error": describeError(err), "ms": time.Since(started).Milliseconds()}
}

func ptr[T any](value T) *T { return &value }

func timestamp(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}
