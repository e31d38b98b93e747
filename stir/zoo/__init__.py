"""Every way to name a model, resolved in one place to one ``Model`` (module, identity, label, record, data).

    model.py        the ``Model`` type
    recipes.py      the zoo file: names -> train.py recipes -> run folders (trained when missing)
    checkpoints.py  this project's run folders and checkpoint files -> networks, data, labels
    resolve.py      ``Zoo``: any name -> ``Model`` (zoo entries, sources, paths), labels unique
    shipped.py      the models whose weights live in the repository (``zoo/``), resolved without training
    ship.py         ``python -m stir.zoo.ship``: a finished run into ``zoo/`` (its accuracy measured again below float32)
    quantize.py     weight-only int8 storage of a shipped model (per output channel) and its dequantization
    ship_results.py ``python -m stir.zoo.ship_results``: finished measurements into ``zoo/store``

The zoo sits above ``stir.training`` (it trains missing zoo models and reads run folders), below the
experiments that use it; ``stir.models.sources`` loads models of other libraries.
"""
from stir.zoo.model import Model
from stir.zoo.recipes import MissingModelError, Recipes, UnknownModelError, load_sourced, load_zoo
from stir.zoo.resolve import Zoo

__all__ = ["MissingModelError", "Model", "Recipes", "UnknownModelError", "Zoo", "load_sourced", "load_zoo"]
