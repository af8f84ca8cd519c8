"""Scrapes a /metrics endpoint over HTTP and reads its samples, for the
tests of the endpoints loco_ps starts (a worker's metrics_port, a
Cluster's metrics=True)."""

import urllib.request


def scrape(address):
    """The samples of http://address/metrics as {"name{labels}": value}.
    Raises OSError when nothing serves there."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as response:
        assert response.status == 200
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


def total(samples, name, **labels):
    """The sum of `name`'s samples whose labels include `labels`."""
    wanted = [f'{key}="{value}"' for key, value in labels.items()]
    return sum(value for key, value in samples.items()
               if key.split("{", 1)[0] == name and all(w in key for w in wanted))
