// Command client runs inside a sample for `make bench-egress`: it downloads a URL and times it,
// then times fresh connections (name lookup, TCP, TLS when https, first byte), and prints one
// JSON object. It is built static, so that it runs in any image.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

type result struct {
	DownloadSeconds []float64 `json:"download_seconds"`
	Bytes           int64     `json:"bytes"`
	ConnectSeconds  []float64 `json:"connect_seconds"`
}

func main() {
	big := flag.String("big", "", "URL to download")
	small := flag.String("small", "", "URL fetched once per fresh connection")
	downloads := flag.Int("downloads", 3, "downloads of -big")
	connects := flag.Int("connects", 200, "fresh connections to -small")
	ca := flag.String("ca", "", "PEM file of the test CA")
	flag.Parse()
	pool := x509.NewCertPool()
	if *ca != "" {
		b, err := os.ReadFile(*ca)
		if err != nil {
			fail(err)
		}
		pool.AppendCertsFromPEM(b)
	}
	client := func() *http.Client {
		return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
			DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}}
	}
	var r result
	for range *downloads {
		start := time.Now()
		resp, err := client().Get(*big)
		if err != nil {
			fail(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil {
			fail(err)
		}
		r.DownloadSeconds = append(r.DownloadSeconds, time.Since(start).Seconds())
		r.Bytes = n
	}
	for range *connects {
		start := time.Now()
		resp, err := client().Get(*small)
		if err != nil {
			fail(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		r.ConnectSeconds = append(r.ConnectSeconds, time.Since(start).Seconds())
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "client:", err)
	os.Exit(1)
}
