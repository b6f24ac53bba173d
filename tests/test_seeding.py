import numpy as np
import torch

from fedprior.seeding import derived_seed, numpy_rng, torch_generator


def test_streams_are_reproducible_and_independent_of_order():
    a1 = numpy_rng(7, "client", 3).random(4)
    numpy_rng(7, "other").random(100)  # using another stream in between changes nothing
    a2 = numpy_rng(7, "client", 3).random(4)
    np.testing.assert_array_equal(a1, a2)


def test_streams_differ_by_key_and_seed():
    base = numpy_rng(7, "client", 3).random(4)
    assert not np.allclose(base, numpy_rng(7, "client", 4).random(4))
    assert not np.allclose(base, numpy_rng(8, "client", 3).random(4))
    assert not np.allclose(base, numpy_rng(7, "server", 3).random(4))


def test_torch_generator_matches_derived_seed():
    g = torch_generator(1, "x")
    expected = torch.Generator().manual_seed(derived_seed(1, "x"))
    assert torch.equal(torch.rand(5, generator=g), torch.rand(5, generator=expected))
    assert 0 <= derived_seed(1, "x") < 2**63
