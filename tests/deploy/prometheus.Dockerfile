# A Prometheus image from Debian's package, for the deployment tests on a
# machine that reaches no registry. Like the official image, its entrypoint
# is the server, so deploy/compose.yaml's arguments work unchanged.
FROM debian:12
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus && chown nobody:nogroup /prometheus
USER nobody
ENTRYPOINT ["/usr/bin/prometheus"]
