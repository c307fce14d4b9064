"""The gallery's image scraper (sphinx-gallery, ``docs/conf.py``): the examples write their
figures as PNG files into ``$STSIM_EXAMPLE_OUT`` (they draw on bare matplotlib figures,
which the default scraper, reading pyplot's, does not see), each with its data beside it
(``<stem>.csv``). After each code block of an example, the figures it wrote since are
copied to the gallery's images and shown in order, each with its data copied beside the
image (and beside the example's thumbnail, made from its first figure) and linked under
it."""
import os
import shutil

_SHOWN = set()


def _data_of(png):
    """The data files an example wrote beside ``png`` (same stem, .csv or .json)."""
    stem = os.path.splitext(png)[0]
    return [stem + ext for ext in (".csv", ".json") if os.path.exists(stem + ext)]


def written_figures(block, block_vars, gallery_conf):
    """The rST of the PNG files the block wrote into ``$STSIM_EXAMPLE_OUT`` (each shown
    once, in the order written), each followed by a link to its data."""
    from sphinx_gallery.scrapers import figure_rst
    out = os.environ["STSIM_EXAMPLE_OUT"]
    new = sorted((p for p in (os.path.join(out, f) for f in os.listdir(out))
                  if p.endswith(".png") and p not in _SHOWN), key=os.path.getmtime)
    rst = []
    for png, dest in zip(new, block_vars["image_path_iterator"]):
        shutil.copyfile(png, dest)
        _SHOWN.add(png)
        stem, images = os.path.splitext(dest)[0], os.path.dirname(dest)
        thumb = os.path.join(images, "thumb", os.path.basename(stem).rsplit("_", 1)[0]
                             + "_thumb")
        links = []
        for data in _data_of(png):
            ext = os.path.splitext(data)[1]
            shutil.copyfile(data, stem + ext)
            if stem.endswith("_001"):            # the thumbnail is the first figure's
                os.makedirs(os.path.dirname(thumb), exist_ok=True)
                shutil.copyfile(data, thumb + ext)
            rel = os.path.relpath(stem + ext, gallery_conf["src_dir"]).replace(os.sep, "/")
            links.append(f":download:`{os.path.basename(data)} </{rel}>`")
        rst.append(figure_rst([dest], gallery_conf["src_dir"])
                   + ("\n\nData: " + ", ".join(links) + "\n" if links else ""))
    return "".join(rst)
