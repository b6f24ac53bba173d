import warnings

import pytest

from fedprior.errors import ConfigError
from fedprior.experiments.config import ExperimentConfig, list_presets, load_config, parse_override


def test_shipped_presets_load_and_validate():
    names = list_presets()
    for required in ("fedavg-cnn", "fedprox-cnn", "scaffold-cnn"):
        assert required in names and names[required]
    for name in names:
        loaded_name, config = load_config(name)
        assert loaded_name == name and isinstance(config, ExperimentConfig)


def test_every_field_has_a_default_and_a_docstring():
    for section, info in ExperimentConfig.model_fields.items():
        model = info.annotation
        for key, field in getattr(model, "model_fields", {}).items():
            assert field.description, f"{section}.{key} has no docstring"
            assert not field.is_required(), f"{section}.{key} has no default"


def test_overrides_are_typed():
    _, config = load_config("fedavg-cnn", ["federation.rounds=3", "federation.fraction=0.5", "algorithm.lr=0.1", "run.seed=4"])
    assert config.federation.rounds == 3 and config.federation.fraction == 0.5
    assert config.algorithm.lr == 0.1 and config.run.seed == 4
    assert parse_override("data.dataset=digits") == (["data", "dataset"], "digits")


@pytest.mark.parametrize(
    "override, message",
    [
        ("federation.fraction=1.5", "federation.fraction: input should be less than or equal to 1"),
        ("federation.num_clients=-3", "federation.num_clients: input should be greater than or equal to 1"),
        ("federation.rounds=-1", "federation.rounds: input should be greater than or equal to 0"),
        ("federation.roundz=3", "federation.roundz: unknown key; accepted: rounds, num_clients"),
        ("algorithm.lrr=1", "algorithm.lrr: unknown key; accepted: model, lr"),
        ("algorithm.lr=0", "algorithm.lr: input should be greater than 0"),
        (
            "partition.scheme=foo",
            "partition.scheme: unknown scheme 'foo'; accepted: iid, shard, dirichlet, window, natural, quantity, or 'flwr:' and the class name of a flwr-datasets partitioner (got 'foo')",
        ),
        ("algorithm.name=nope", "algorithm.name: unknown algorithm 'nope'; accepted: fedavg"),
        ("bogus.x=1", "unknown section 'bogus'"),
        ("federation", "expected section.key=value"),
        ("algorithm.tau=0", "algorithm.tau: input should be greater than or equal to 1e-38 (got 0)"),  # not 38 zeros (probe 5 R4)
        ("run.wandb_project='mine'", "run.wandb_project: applies with run.wandb ('offline' or 'online'), which is unset; set run.wandb too"),
        ("run.mlflow_experiment='mine'", "run.mlflow_experiment: applies with run.mlflow (a tracking URI), which is unset"),
    ],
)
def test_bad_values_name_the_field(override, message):
    with pytest.raises(ConfigError) as error:
        load_config("fedadam-cnn" if override.startswith("algorithm.tau") else "fedavg-cnn", [override])
    assert message in str(error.value)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigError, match="unknown preset 'nope'; accepted: .*fedavg-cnn"):
        load_config("nope")


def test_config_file_path(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('[federation]\nrounds = 2\n[algorithm]\nname = "fedprox"\nmu = 0.5\n')
    name, config = load_config(str(path))
    assert name == "mine" and config.federation.rounds == 2 and config.algorithm.mu == 0.5
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "missing.toml"))


def test_presets_come_from_the_shared_folder_and_every_paper():
    from fedprior.experiments.config import preset_paths

    paths = preset_paths()
    assert paths["fedavg-cnn"].parent.name == "presets" and paths["fst-cbdg"].parent.parent.name == "fst_cbdg"


# ----------------------------------------------------------------------------- issue 7, item 10


def test_rounds_true_is_not_one_round():
    with pytest.raises(ConfigError, match="federation.rounds: input should be a number, not true or false"):
        load_config("fedavg-cnn", ["federation.rounds=true"])


def test_a_run_folders_config_can_be_run_again(tmp_path):
    from fedprior.experiments.run_config import write_config
    from fedprior.results.run_dir import RunDir

    name, config = load_config("fst-cbdg", ["federation.rounds=3", "run.seed=5"])
    write_config(RunDir(tmp_path), name, config)
    again_name, again = load_config(str(tmp_path / "config.toml"))
    assert again_name == "fst-cbdg" and again == config  # the `name` key is the experiment name, not an unknown key


def test_a_preset_name_wins_over_a_same_named_folder_or_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fst-cbdg").mkdir()
    (tmp_path / "zero-shot").write_text("not toml [")
    assert load_config("fst-cbdg")[0] == "fst-cbdg" and load_config("zero-shot")[0] == "zero-shot"
    with pytest.raises(ConfigError, match="config file ./fst-cbdg is a folder, not a file"):
        load_config("./fst-cbdg")  # with a slash it is a path


def test_a_folder_given_as_config_is_named_as_such(tmp_path):
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(ConfigError, match="dir.toml is a folder, not a file"):
        load_config(str(tmp_path / "dir.toml"))


def test_utf8_bom_is_accepted_and_other_encodings_are_one_line(tmp_path):
    (tmp_path / "bom.toml").write_bytes(b"\xef\xbb\xbf[federation]\nrounds = 4\n")
    assert load_config(str(tmp_path / "bom.toml"))[1].federation.rounds == 4
    (tmp_path / "utf16.toml").write_bytes("[federation]\nrounds = 4\n".encode("utf-16"))
    with pytest.raises(ConfigError, match=r"utf16.toml: not UTF-8 text \(byte 0xff at position 0\); save it as UTF-8"):
        load_config(str(tmp_path / "utf16.toml"))


def test_a_preset_changed_by_overrides_is_described_as_the_config_it_now_is():
    """Issue 33 item 2: the preset's description where only the seed or where and how the run executes changed, else the run's own."""
    from tests.support.cli import invoke

    preset = list_presets()["fedavg-cnn"]
    assert load_config("fedavg-cnn", ["run.seed=3", "run.workers=1", "data.root='/data'", "federation.evaluate_every=2"])[1].description == preset
    _, config = load_config("fedavg-cnn", ["data.dataset=digits", "federation.num_clients=6", "partition.scheme=iid", "federation.fraction=0.5"])
    assert config.description == "fedavg on digits: 6 clients, IID, 50% per round, 20 rounds, 1 local epoch, batch 32 (made from the preset 'fedavg-cnn')"
    _, config = load_config("fedprox-cnn", ["algorithm.mu=0.1"])  # the preset's says 'mu 0.01'
    assert config.description.startswith("fedprox on fashion-mnist: 100 clients, Dirichlet 0.5, 10% per round, 20 rounds")
    shown = invoke("presets", "show", "fedavg-cnn", "--set", "data.dataset=digits")
    assert shown.exit_code == 0 and 'description = "fedavg on digits: 100 clients, Dirichlet 0.5, 10% per round' in shown.stdout


TUNED = '[data]\ndataset = "digits"\n[algorithm]\nname = "fedavgm"\nlr = 0.1\nserver_lr = 0.5\n'
"""A config written for FedAvgM whose lr and server_lr are away from every algorithm's defaults."""


def test_switching_the_algorithm_names_the_values_carried_or_dropped(tmp_path):
    """Issue 46: --set algorithm.name=X carries the config's other algorithm values into X, --algorithm X drops them for X's
    defaults; either says which (those away from X's defaults), and a switch that changes nothing says nothing."""
    path = tmp_path / "tuned.toml"
    path.write_text(TUNED)
    with pytest.warns(UserWarning, match=r"^--set algorithm.name=fedadam keeps .*written for 'fedavgm': algorithm.server_lr = 0.5 \(its default 0.01\)"):
        assert load_config(str(path), ["algorithm.name='fedadam'", "algorithm.lr=0.1"])[1].algorithm.server_lr == 0.5
    with pytest.warns(UserWarning, match=r"algorithm.lr = 0.05 \(fedadam's default; .* has 0.1\), algorithm.server_lr = 0.01 .*--set algorithm.lr=0.1"):
        assert load_config(str(path), algorithm="fedadam")[1].algorithm.server_lr == 0.01
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_config(str(path), ["algorithm.lr=0.05", "algorithm.server_lr=0.01"], algorithm="fedadam")
        load_config("fedavg-cnn", algorithm="fedadam")  # the preset's lr and model are fedadam's defaults
        load_config(str(path))
