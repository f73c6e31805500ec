
BroisJ ýÍB…)>ýÍB²†AŸLGBÌDõAÒHB2«÷AhÓAŽB+„eBqGBe4BŠºqAÇSBÒü.B8lIAüün>{vABÛÒrAÖùUÀŽUÈ@F¿f?†AÓV+BÂAkFsBØ“ˆA!CBy÷AOÞB‡NôAÀTA`½+B)½ÎA1B8$åAÍ|¶A’Û`B zB