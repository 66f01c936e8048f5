import pytest

from attnkit.server.limits import StudioLimits
from attnkit.server.service import Studio


@pytest.fixture(scope="session")
def studio(trained_toys):
    """The toy Transformer and RNN, served as "toy_transformer" and "toy_rnn"; small limits to test them."""
    return Studio(
        [str(trained_toys["transformer"]), str(trained_toys["rnn"])],
        limits=StudioLimits(max_chars=200, max_tokens=40, max_beam=8, max_nbest=4),
    )


@pytest.fixture(scope="session")
def names(studio):
    """{"transformer": served name, "rnn": served name}."""
    t, r = list(studio.models)
    return {"transformer": t, "rnn": r}
