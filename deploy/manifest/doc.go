// Package manifest holds the tests of the production deployment files in
// deploy/: the image build (Dockerfile), the single-host install
// (compose.yaml, alone and with compose.postgres.yaml) and the Kubernetes
// manifests (k8s/, as they are and with the component postgres/). Nothing
// here runs a container; the tests read the files and hold them to the programs' own
// configuration tables (each tier's config.Vars), their listeners and
// health routes, the Kafka topics of core/api and the Makefile's programs.
package manifest
