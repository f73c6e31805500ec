BroisJАC▐I╘BCRЖCНОC\╢ГCєAОC┬▄ГCэiўA·zUC█БMC\гC┼╜gC6їCЭЧC1meC
C╓ЪB{tC"╒ўB}░}Cп╦Bй┐зCН3ЪB5wїBU@B█РC╟жеBNCв/Cэu▒CJ\[C